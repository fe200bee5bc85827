package dns

import (
	"net/netip"
	"time"

	mdns "github.com/miekg/dns"
)

// index holds the usable records of a set of responses by owner name
// (canonical: lower case, fully qualified). Only class IN records of
// NOERROR responses, from the answer and additional sections, are used;
// duplicates are kept once.
type index struct {
	cname  map[string]cnameRec
	srv    map[string][]*mdns.SRV
	addr   map[string][]addrRec
	negTTL time.Duration

	seenSRV  map[srvKey]struct{}
	seenAddr map[addrKey]struct{}
}

type cnameRec struct {
	target string
	ttl    time.Duration
}

type addrRec struct {
	addr  netip.Addr
	rtype uint16
	ttl   time.Duration
}

type srvKey struct {
	owner, target          string
	port, priority, weight uint16
}

type addrKey struct {
	owner string
	addr  netip.Addr
}

func newIndex(msgs []*mdns.Msg) *index {
	x := &index{
		cname:    map[string]cnameRec{},
		srv:      map[string][]*mdns.SRV{},
		addr:     map[string][]addrRec{},
		negTTL:   unknownTTL,
		seenSRV:  map[srvKey]struct{}{},
		seenAddr: map[addrKey]struct{}{},
	}
	for _, m := range msgs {
		if m == nil {
			continue
		}
		for _, rr := range m.Ns {
			if soa, ok := rr.(*mdns.SOA); ok {
				x.negTTL = min(x.negTTL, ttlOf(soa.Hdr.Ttl), ttlOf(soa.Minttl))
			}
		}
		if m.Rcode != mdns.RcodeSuccess {
			continue
		}
		for _, rr := range m.Answer {
			x.add(rr)
		}
		for _, rr := range m.Extra {
			x.add(rr)
		}
	}
	return x
}

func (x *index) add(rr mdns.RR) {
	h := rr.Header()
	if h == nil || h.Class != mdns.ClassINET {
		return
	}
	owner := mdns.CanonicalName(h.Name)
	switch r := rr.(type) {
	case *mdns.CNAME:
		if _, ok := x.cname[owner]; !ok {
			x.cname[owner] = cnameRec{target: mdns.CanonicalName(r.Target), ttl: ttlOf(h.Ttl)}
		}
	case *mdns.SRV:
		k := srvKey{owner, mdns.CanonicalName(r.Target), r.Port, r.Priority, r.Weight}
		if _, dup := x.seenSRV[k]; !dup {
			x.seenSRV[k] = struct{}{}
			x.srv[owner] = append(x.srv[owner], r)
		}
	case *mdns.A:
		x.addAddr(owner, r.A, mdns.TypeA, h.Ttl)
	case *mdns.AAAA:
		x.addAddr(owner, r.AAAA, mdns.TypeAAAA, h.Ttl)
	}
}

func (x *index) addAddr(owner string, ip []byte, rtype uint16, ttl uint32) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return
	}
	if rtype == mdns.TypeA {
		a = a.Unmap()
	}
	k := addrKey{owner, a}
	if _, dup := x.seenAddr[k]; dup {
		return
	}
	x.seenAddr[k] = struct{}{}
	x.addr[owner] = append(x.addr[owner], addrRec{addr: a, rtype: rtype, ttl: ttlOf(ttl)})
}

// chase follows the CNAME chain from name, at most maxChain links (a loop
// or a longer chain stops there), and returns the last name and the
// shortest TTL of the links followed.
func (x *index) chase(name string) (string, time.Duration) {
	ttl := unknownTTL
	for range maxChain {
		c, ok := x.cname[name]
		if !ok {
			break
		}
		name, ttl = c.target, min(ttl, c.ttl)
	}
	return name, ttl
}

// addrs returns the usable addresses of name (already chased) in the
// family, in record order, and their shortest TTL. Unspecified, multicast
// and other addresses no server can listen on are left out.
func (x *index) addrs(name string, fam Family) ([]netip.Addr, time.Duration) {
	ttl := unknownTTL
	var out []netip.Addr
	for _, r := range x.addr[name] {
		if !fam.wants(r.rtype) {
			continue
		}
		if r.addr.IsUnspecified() || r.addr.IsMulticast() {
			continue
		}
		out = append(out, r.addr)
		ttl = min(ttl, r.ttl)
	}
	return out, ttl
}

// resolved reports whether name, after its CNAME chain, has an address of
// the family among the records, and returns the end of the chain.
func (x *index) resolved(name string, fam Family) (string, bool) {
	final, _ := x.chase(mdns.CanonicalName(name))
	addrs, _ := x.addrs(final, fam)
	return final, len(addrs) > 0
}
