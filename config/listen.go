package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/xdsbridge/xdsbridge/settings"
)

// checkListen checks that addr is host:port with a numeric port. The host
// is not resolved: validation does no I/O.
func checkListen(key, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if ae, ok := errors.AsType[*net.AddrError](err); ok {
		err = errors.New(ae.Err) // without its "address x:", the value being named already
	}
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil {
			err = fmt.Errorf("port %q is not a number in 0..65535", port)
		} else if strings.ContainsAny(host, " /") {
			err = fmt.Errorf("host %q is not a host name or IP address", host)
		}
	}
	if err != nil {
		return settings.Errorf(key, "invalid address %q: %w", addr, err)
	}
	return nil
}

// checkCollisions reports two listeners that could not both bind: the
// same port on the same host, or on a wildcard host (empty, 0.0.0.0, ::)
// and any other. Without it `validate` passes and `run` fails with
// "address already in use". Port 0 never collides (each listener gets a
// port of its own), and host names other than localhost are compared as
// written, since validation does no I/O. The later key of a pair is
// blamed; every address must have passed checkListen.
func (c *Config) checkCollisions() error {
	type listener struct{ key, addr string }
	ls := []listener{{"xds.listen", c.XDS.Listen}, {"admin.listen", c.Admin.Listen}}
	if c.XDS.REST.Enabled && c.XDS.REST.Listen != RESTOnAdmin {
		ls = append(ls, listener{"xds.rest.listen", c.XDS.REST.Listen})
	}
	for i, l := range ls {
		for _, prev := range ls[:i] {
			if why := collision(prev.addr, l.addr); why != "" {
				return settings.Errorf(l.key, "%s collides with %s (%s): %s", l.addr, prev.key, prev.addr, why)
			}
		}
	}
	return nil
}

// collision says why listeners on a and b could not both bind, or "" when
// they can.
func collision(a, b string) string {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	na, _ := strconv.Atoi(pa)
	nb, _ := strconv.Atoi(pb)
	if na == 0 || na != nb {
		return ""
	}
	if wildcard(ha) || wildcard(hb) {
		return fmt.Sprintf("a wildcard host takes port %d on every address", na)
	}
	for _, x := range hostAddrs(ha) {
		if slices.Contains(hostAddrs(hb), x) {
			return "each listener needs an address of its own"
		}
	}
	return ""
}

// wildcard reports whether host binds every address.
func wildcard(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "" || (err == nil && ip.IsUnspecified())
}

// hostAddrs is what host stands for when comparing listeners: its
// canonical IP, both loopback addresses for localhost, else the name in
// lower case.
func hostAddrs(host string) []string {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []string{ip.Unmap().String()}
	}
	if strings.EqualFold(host, "localhost") {
		return []string{"127.0.0.1", "::1"}
	}
	return []string{strings.ToLower(host)}
}
