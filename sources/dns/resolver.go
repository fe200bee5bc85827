package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"

	mdns "github.com/miekg/dns"
)

// errNegative marks an authoritative "no such name / no such data" answer:
// an empty result, not a failure.
var errNegative = errors.New("negative answer")

// resolver sends queries to a list of servers in turn, starting with the
// one that answered last, so that a dead first server does not cost a
// timeout on every query.
type resolver struct {
	servers   []string // host:port
	preferred atomic.Int32
	// names expands a configured name into the names to try, in order
	// (the resolv.conf search list); nil means the name as it is.
	names func(string) []string
	// system, when set, supplies servers and names from resolv.conf,
	// re-read when it changes.
	system *systemConf
	udp    *mdns.Client
	tcp    *mdns.Client
	// ednsSize is the UDP payload size advertised with EDNS0 (RFC 6891);
	// it is also the size of the receive buffer, so a UDP answer never
	// exceeds it. The default, 1232, is the DNS flag day 2020 value that
	// avoids IP fragmentation.
	ednsSize  uint16
	transport string
	// attempts is how many rounds over the servers a query gets: one lost
	// UDP packet must not fail a lookup when a single server is configured.
	attempts int
}

// exchange asks each server in turn for name/qtype and returns the first
// usable response: NOERROR (with or without data) or NXDOMAIN. SERVFAIL,
// REFUSED, other rcodes, timeouts and malformed responses move on to the
// next server; when every server failed, the last error is returned.
//
// A query goes over UDP with EDNS0; a truncated response is asked again
// over TCP (RFC 7766).
func (r *resolver) exchange(ctx context.Context, name string, qtype uint16) (*mdns.Msg, error) {
	q := new(mdns.Msg)
	q.SetQuestion(name, qtype)
	q.SetEdns0(r.ednsSize, false)
	var last error
	servers, _ := r.current()
	first := int(r.preferred.Load())
	for k := range max(r.attempts, 1) * len(servers) {
		i := (first + k) % len(servers)
		srv := servers[i]
		resp, err := r.ask(ctx, q, srv)
		if err == nil {
			r.preferred.Store(int32(i))
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		last = fmt.Errorf("asking %s for %s %s: %w", srv, name, mdns.TypeToString[qtype], err)
	}
	if last == nil {
		last = errors.New("no DNS servers configured")
	}
	return nil, last
}

func (r *resolver) ask(ctx context.Context, q *mdns.Msg, srv string) (*mdns.Msg, error) {
	first := r.udp
	if r.overTCP(q.Question[0].Name, srv) {
		first = r.tcp
	}
	resp, err := r.once(ctx, first, q, srv)
	if err == nil && resp.Truncated && first != r.tcp {
		resp, err = r.once(ctx, r.tcp, q, srv)
		if err == nil && resp.Truncated {
			err = errors.New("truncated response over TCP")
		}
	}
	if err != nil {
		return nil, err
	}
	switch resp.Rcode {
	case mdns.RcodeSuccess, mdns.RcodeNameError:
		return resp, nil
	}
	return nil, fmt.Errorf("server answered %s", rcodeName(resp.Rcode))
}

func (r *resolver) once(ctx context.Context, c *mdns.Client, q *mdns.Msg, srv string) (*mdns.Msg, error) {
	qctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	resp, _, err := c.ExchangeContext(qctx, q, srv)
	if err != nil {
		return nil, err
	}
	if !resp.Response || len(resp.Question) != 1 || resp.Question[0].Qtype != q.Question[0].Qtype ||
		mdns.CanonicalName(resp.Question[0].Name) != mdns.CanonicalName(q.Question[0].Name) {
		return nil, errors.New("malformed response: question does not match")
	}
	return resp, nil
}

// query resolves name/qtype, trying the search-list expansions in turn
// (the first one that is not a negative answer wins), and follows a CNAME
// chain that the response does not complete, up to maxChain queries. It
// returns every response received; err is errNegative when the name (or
// every expansion) does not exist or has no data of that type.
func (r *resolver) query(ctx context.Context, name string, qtype uint16) (string, []*mdns.Msg, error) {
	names := []string{mdns.Fqdn(name)}
	if _, expand := r.current(); expand != nil && !mdns.IsFqdn(name) {
		names = expand(name)
	}
	var msgs []*mdns.Msg
	for _, n := range names {
		got, err := r.follow(ctx, n, qtype)
		msgs = append(msgs, got...)
		if !errors.Is(err, errNegative) {
			return n, msgs, err
		}
	}
	return names[len(names)-1], msgs, errNegative
}

func (r *resolver) follow(ctx context.Context, name string, qtype uint16) ([]*mdns.Msg, error) {
	var msgs []*mdns.Msg
	q := name
	for range maxChain {
		resp, err := r.exchange(ctx, q, qtype)
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, resp)
		if resp.Rcode == mdns.RcodeNameError {
			return msgs, errNegative
		}
		x := newIndex(msgs)
		final, _ := x.chase(mdns.CanonicalName(name))
		if hasType(resp, final, qtype) {
			return msgs, nil
		}
		if final == mdns.CanonicalName(q) {
			return msgs, errNegative // NODATA
		}
		q = final
	}
	return msgs, errNegative
}

func hasType(m *mdns.Msg, name string, qtype uint16) bool {
	for _, rr := range m.Answer {
		h := rr.Header()
		if h.Rrtype == qtype && mdns.CanonicalName(h.Name) == name {
			return true
		}
	}
	return false
}

func rcodeName(rc int) string {
	if s, ok := mdns.RcodeToString[rc]; ok {
		return s
	}
	return "rcode " + strconv.Itoa(rc)
}

// hostPort adds the default DNS port to a server written without one.
func hostPort(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), "53"
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return "", fmt.Errorf("%q is not an IP address or IP:port", s)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("%q has an invalid port", s)
	}
	return net.JoinHostPort(host, port), nil
}
