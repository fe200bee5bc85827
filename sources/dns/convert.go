package dns

import (
	"math"
	"net/netip"
	"slices"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Bounds on what one answer may make the source do or hold. A hostile or
// broken server can send up to 64 KiB per TCP message; these keep the work
// and the output proportional to what Envoy can sensibly use.
const (
	// MaxRecords is the number of SRV records (or, for a host entry, of
	// addresses) taken from one name's answer; the rest are dropped and
	// counted.
	MaxRecords = 1000
	// MaxEndpoints is the number of endpoints one service may have (an SRV
	// target can have several addresses); the rest are dropped and counted.
	MaxEndpoints = 4096
	// maxChain is how many CNAMEs are followed from one name.
	maxChain = 8
	// maxTTL clamps absurd TTLs before the refresh bounds apply.
	maxTTL = 24 * time.Hour
	// unknownTTL marks "no record seen" while the shortest TTL is computed.
	unknownTTL = time.Duration(math.MaxInt64)
)

// Kind is what a configured name is looked up as.
type Kind uint8

const (
	// KindSRV looks up SRV records and resolves their targets.
	KindSRV Kind = iota
	// KindHost looks up A/AAAA records of a host name with a fixed port.
	KindHost
)

// Family selects the address records used to resolve targets.
type Family uint8

// The families: both, IPv4 only, IPv6 only.
const (
	FamilyAny Family = iota
	FamilyIPv4
	FamilyIPv6
)

func (f Family) wants(t uint16) bool {
	switch t {
	case mdns.TypeA:
		return f != FamilyIPv6
	case mdns.TypeAAAA:
		return f != FamilyIPv4
	}
	return false
}

// Input is everything a lookup of one configured name collected: the
// responses to the name's own query (and to the queries that followed its
// CNAME chain), and the responses to the A/AAAA queries of SRV targets that
// the first responses did not resolve. Convert needs nothing else.
type Input struct {
	Kind   Kind
	Name   string // the name queried, fully qualified
	Port   uint32 // KindHost only
	Family Family
	Msgs   []*mdns.Msg
}

// Result is the model Convert derives from an Input.
type Result struct {
	// Endpoints are valid (sources.Endpoint.Validate), sorted, with
	// priorities contiguous from 0 and weights of at least 1.
	Endpoints []sources.Endpoint
	// Dropped counts records left out: SRV targets without addresses,
	// invalid ports or addresses, records beyond the caps.
	Dropped int
	// TTL is the shortest TTL of the records used and of the negative
	// answers (RFC 2308: the SOA's TTL or MINIMUM, whichever is smaller);
	// 0 when zero or unknown.
	TTL time.Duration
}

// Convert turns the responses of one lookup into endpoints. It is pure
// (no I/O, no clock) so that it can be fuzzed, and bounded: its work and
// output grow at most linearly with the size of the messages, and the
// output is capped by MaxRecords and MaxEndpoints.
//
// Responses whose rcode is not NOERROR contribute nothing but their
// negative TTL, so an NXDOMAIN is an empty result, like a NODATA answer
// or an SRV set whose only target is "." (RFC 2782: service not
// available).
func Convert(in Input) Result {
	idx := newIndex(in.Msgs)
	name := mdns.CanonicalName(in.Name)
	final, ttl := idx.chase(name)
	var res Result
	switch in.Kind {
	case KindHost:
		res = idx.hostEndpoints(final, in.Port, in.Family)
	default:
		res = idx.srvEndpoints(final, in.Family)
	}
	res.TTL = min(res.TTL, ttl, idx.negTTL)
	if res.TTL == unknownTTL {
		res.TTL = 0
	}
	res.Endpoints = normalize(res.Endpoints, &res.Dropped)
	return res
}

// target is one SRV record after resolution of its target.
type target struct {
	srv   *mdns.SRV
	addrs []netip.Addr
}

func (x *index) srvEndpoints(name string, fam Family) Result {
	res := Result{TTL: unknownTTL}
	records := x.srv[name]
	if len(records) > MaxRecords {
		res.Dropped += len(records) - MaxRecords
		records = records[:MaxRecords]
	}
	var targets []target
	for _, rr := range records {
		res.TTL = min(res.TTL, ttlOf(rr.Hdr.Ttl))
		t := mdns.CanonicalName(rr.Target)
		if t == "." {
			// RFC 2782: "service decidedly not available" when it is the
			// only record; alongside others it names nothing to use.
			continue
		}
		final, ttl := x.chase(t)
		addrs, attl := x.addrs(final, fam)
		if len(addrs) == 0 || rr.Port == 0 {
			res.Dropped++
			continue
		}
		res.TTL = min(res.TTL, ttl, attl)
		targets = append(targets, target{srv: rr, addrs: addrs})
	}
	res.Endpoints = srvWeights(targets)
	return res
}

func (x *index) hostEndpoints(name string, port uint32, fam Family) Result {
	addrs, ttl := x.addrs(name, fam)
	res := Result{TTL: ttl}
	if len(addrs) > MaxRecords {
		res.Dropped += len(addrs) - MaxRecords
		addrs = addrs[:MaxRecords]
	}
	for _, a := range addrs {
		res.Endpoints = append(res.Endpoints, sources.Endpoint{Address: a.String(), Port: port, Weight: 1,
			Origin: sources.Origin{Record: "A/AAAA " + name}})
	}
	return res
}

// srvWeights maps SRV priorities and weights onto endpoints.
//
// RFC 2782's selection gives a record of weight w the chance w/(S+1) within
// its priority, where S is the sum of the weights, and all weight-0
// records together the chance 1/(S+1). Envoy needs weights of at least 1,
// so within a priority that has z>0 weight-0 records and some non-zero
// ones, every non-zero weight is multiplied by z and each weight-0 record
// gets 1: the shares are then exactly the RFC's. A priority whose weights
// are all 0 gets 1 for each (an even spread). A target with n addresses
// splits its weight among them (each address gets weight·L/n, L being the
// least common multiple of the address counts in the priority, when that
// stays small), so a dual-stack target does not count double. Should the
// sum in one priority exceed Envoy's limit (2^32-1), all weights of that
// priority are divided down, keeping each at least 1.
func srvWeights(ts []target) []sources.Endpoint {
	slices.SortStableFunc(ts, func(a, b target) int { return int(a.srv.Priority) - int(b.srv.Priority) })
	var out []sources.Endpoint
	for i := 0; i < len(ts); {
		j := i
		for j < len(ts) && ts[j].srv.Priority == ts[i].srv.Priority {
			j++
		}
		out = appendGroup(out, ts[i:j])
		i = j
	}
	return out
}

func appendGroup(out []sources.Endpoint, group []target) []sources.Endpoint {
	zeros := uint64(0)
	l := uint64(1)
	for _, t := range group {
		if t.srv.Weight == 0 {
			zeros++
		}
		if l <= 12 {
			l = lcm(l, uint64(len(t.addrs)))
		}
	}
	if l > 12 {
		l = 1
	}
	allZero := zeros == uint64(len(group))
	weights := make([]uint64, 0, len(group)*2)
	sum := uint64(0)
	for _, t := range group {
		var w uint64
		switch {
		case allZero || t.srv.Weight == 0:
			w = 1
		default:
			w = uint64(t.srv.Weight) * max(zeros, 1)
		}
		per := w * l / uint64(len(t.addrs))
		for range t.addrs {
			weights = append(weights, max(per, 1))
			sum += max(per, 1)
		}
	}
	div := uint64(1)
	if sum > math.MaxUint32 {
		div = sum/math.MaxUint32 + 1
	}
	k := 0
	for _, t := range group {
		for _, a := range t.addrs {
			out = append(out, sources.Endpoint{
				Address:  a.String(),
				Port:     uint32(t.srv.Port),
				Weight:   uint32(max(weights[k]/div, 1)),
				Priority: uint32(t.srv.Priority),
				Origin:   sources.Origin{Record: "SRV " + t.srv.Hdr.Name + " -> " + t.srv.Target},
			})
			k++
		}
	}
	return out
}

// normalize drops invalid endpoints, merges duplicates (same address and
// port: the lower priority wins, weights within one priority add up, as
// either record leads to the same server), caps the count, makes the
// priorities contiguous from 0, and sorts.
func normalize(eps []sources.Endpoint, dropped *int) []sources.Endpoint {
	type key struct {
		addr string
		port uint32
	}
	seen := make(map[key]int, len(eps))
	out := eps[:0]
	for _, e := range eps {
		if e.Validate() != nil {
			*dropped++
			continue
		}
		k := key{e.Address, e.Port}
		if i, ok := seen[k]; ok {
			if out[i].Priority == e.Priority {
				out[i].Weight = uint32(min(uint64(out[i].Weight)+uint64(e.Weight), math.MaxUint32))
			}
			continue
		}
		if len(out) == MaxEndpoints {
			*dropped++
			continue
		}
		seen[k] = len(out)
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil
	}
	prios := make([]uint32, 0, 4)
	for _, e := range out {
		prios = append(prios, e.Priority)
	}
	slices.Sort(prios)
	prios = slices.Compact(prios)
	for i := range out {
		p, _ := slices.BinarySearch(prios, out[i].Priority)
		out[i].Priority = uint32(p)
	}
	svc := sources.Service{Endpoints: out}
	svc.Sort()
	return svc.Endpoints
}

func lcm(a, b uint64) uint64 {
	if b == 0 {
		return a
	}
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// ttlOf converts a record TTL, treating values with the top bit set as 0
// (RFC 2181 section 8) and clamping the rest to maxTTL.
func ttlOf(ttl uint32) time.Duration {
	if ttl > math.MaxInt32 {
		return 0
	}
	return min(time.Duration(ttl)*time.Second, maxTTL)
}
