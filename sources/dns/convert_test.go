package dns

import (
	"fmt"
	"slices"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/xdsbridge/xdsbridge/sources"
)

const api = "_api._tcp.example.org."

// msg builds a NOERROR response (or rcode) from records in zone syntax.
func msg(rcode int, answer, extra, ns []string) *mdns.Msg {
	m := new(mdns.Msg)
	m.Response = true
	m.Rcode = rcode
	m.Answer, m.Extra, m.Ns = mustRRs(answer), mustRRs(extra), mustRRs(ns)
	return m
}

func ep(addr string, port, weight, prio uint32) sources.Endpoint {
	return sources.Endpoint{Address: addr, Port: port, Weight: weight, Priority: prio}
}

func TestConvert(t *testing.T) {
	soa := "example.org. 300 IN SOA ns.example.org. admin.example.org. 1 60 60 600 30"
	cases := []struct {
		name    string
		in      Input
		want    []sources.Endpoint
		dropped int
		ttl     time.Duration
	}{
		{
			name: "priorities contiguous, weight 0 kept with RFC 2782 share",
			in: Input{Name: api, Msgs: []*mdns.Msg{msg(0,
				srvs(api, 60, "10 0 8080 a.example.org.", "10 10 8081 b.example.org.", "10 60 8082 c.example.org.", "20 5 9000 d.example.org."),
				[]string{"a.example.org. 30 IN A 10.0.0.1", "b.example.org. 30 IN A 10.0.0.2", "c.example.org. 30 IN A 10.0.0.3", "d.example.org. 30 IN A 10.0.0.4"},
				nil)}},
			want: []sources.Endpoint{ep("10.0.0.1", 8080, 1, 0), ep("10.0.0.2", 8081, 10, 0), ep("10.0.0.3", 8082, 60, 0), ep("10.0.0.4", 9000, 5, 1)},
			ttl:  30 * time.Second,
		},
		{
			name: "two weight-0 records: non-zero weights scaled by their count",
			in: Input{Name: api, Msgs: []*mdns.Msg{msg(0,
				srvs(api, 60, "1 0 80 a.example.org.", "1 0 80 b.example.org.", "1 10 80 c.example.org."),
				[]string{"a.example.org. 60 IN A 10.0.0.1", "b.example.org. 60 IN A 10.0.0.2", "c.example.org. 60 IN A 10.0.0.3"}, nil)}},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 1, 0), ep("10.0.0.2", 80, 1, 0), ep("10.0.0.3", 80, 20, 0)},
			ttl:  60 * time.Second,
		},
		{
			name: "all weights 0: even spread",
			in: Input{Name: api, Msgs: []*mdns.Msg{msg(0,
				srvs(api, 60, "5 0 80 a.example.org.", "5 0 80 b.example.org."),
				[]string{"a.example.org. 60 IN A 10.0.0.1", "b.example.org. 60 IN A 10.0.0.2"}, nil)}},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 1, 0), ep("10.0.0.2", 80, 1, 0)},
			ttl:  60 * time.Second,
		},
		{
			name: "dual-stack target splits its weight over its addresses",
			in: Input{Name: api, Msgs: []*mdns.Msg{msg(0,
				srvs(api, 60, "0 10 80 a.example.org.", "0 10 80 b.example.org."),
				[]string{"a.example.org. 60 IN A 10.0.0.1", "a.example.org. 60 IN AAAA 2001:db8::1", "b.example.org. 60 IN A 10.0.0.2"}, nil)}},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 10, 0), ep("10.0.0.2", 80, 20, 0), ep("2001:db8::1", 80, 10, 0)},
			ttl:  60 * time.Second,
		},
		{
			name: "family ipv6 uses AAAA only",
			in: Input{Name: api, Family: FamilyIPv6, Msgs: []*mdns.Msg{msg(0,
				srvs(api, 60, "0 10 80 a.example.org.", "0 10 80 b.example.org."),
				[]string{"a.example.org. 60 IN A 10.0.0.1", "a.example.org. 60 IN AAAA 2001:db8::1", "b.example.org. 60 IN A 10.0.0.2"}, nil)}},
			want:    []sources.Endpoint{ep("2001:db8::1", 80, 10, 0)},
			dropped: 1,
			ttl:     60 * time.Second,
		},
		{
			name: "addresses from a separate response, through a CNAME chain",
			in: Input{Name: api, Msgs: []*mdns.Msg{
				msg(0, srvs(api, 60, "0 1 80 alias.example.org."), nil, nil),
				msg(0, []string{"alias.example.org. 20 IN CNAME alias2.example.org.", "alias2.example.org. 40 IN CNAME real.example.org.", "real.example.org. 50 IN A 10.1.1.1"}, nil, nil),
			}},
			want: []sources.Endpoint{ep("10.1.1.1", 80, 1, 0)},
			ttl:  20 * time.Second,
		},
		{
			name: "CNAME loop: target dropped",
			in: Input{Name: api, Msgs: []*mdns.Msg{
				msg(0, srvs(api, 60, "0 1 80 x.example.org.", "0 1 80 ok.example.org."),
					[]string{"x.example.org. 60 IN CNAME y.example.org.", "y.example.org. 60 IN CNAME x.example.org.", "ok.example.org. 60 IN A 10.0.0.9"}, nil),
			}},
			want:    []sources.Endpoint{ep("10.0.0.9", 80, 1, 0)},
			dropped: 1,
			ttl:     60 * time.Second,
		},
		{
			name: "SRV name behind a CNAME",
			in: Input{Name: "svc.example.org.", Msgs: []*mdns.Msg{
				msg(0, append([]string{"svc.example.org. 10 IN CNAME " + api}, srvs(api, 60, "0 1 80 a.example.org.")...),
					[]string{"a.example.org. 60 IN A 10.0.0.1"}, nil),
			}},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 1, 0)},
			ttl:  10 * time.Second,
		},
		{
			name: "target . means service not available",
			in:   Input{Name: api, Msgs: []*mdns.Msg{msg(0, srvs(api, 45, "0 0 0 ."), nil, nil)}},
			ttl:  45 * time.Second,
		},
		{
			name: "NXDOMAIN is empty with the SOA's negative TTL",
			in:   Input{Name: api, Msgs: []*mdns.Msg{msg(mdns.RcodeNameError, nil, nil, []string{soa})}},
			ttl:  30 * time.Second,
		},
		{
			name: "records of a non-NOERROR response are ignored",
			in: Input{Name: api, Msgs: []*mdns.Msg{msg(mdns.RcodeServerFailure,
				srvs(api, 60, "0 1 80 a.example.org."), []string{"a.example.org. 60 IN A 10.0.0.1"}, nil)}},
		},
		{
			name: "non-resolving target and port 0 dropped, the rest served; priority made contiguous",
			in: Input{Name: api, Msgs: []*mdns.Msg{msg(0,
				srvs(api, 60, "1 1 80 gone.example.org.", "2 1 0 a.example.org.", "3 1 81 a.example.org."),
				[]string{"a.example.org. 60 IN A 10.0.0.1"}, nil)}},
			want:    []sources.Endpoint{ep("10.0.0.1", 81, 1, 0)},
			dropped: 2,
			ttl:     60 * time.Second,
		},
		{
			name: "unspecified and multicast addresses are unusable",
			in: Input{Name: api, Msgs: []*mdns.Msg{msg(0,
				srvs(api, 60, "0 1 80 a.example.org."),
				[]string{"a.example.org. 60 IN A 0.0.0.0", "a.example.org. 60 IN A 224.0.0.1"}, nil)}},
			dropped: 1,
			ttl:     60 * time.Second,
		},
		{
			name: "same address and port: lower priority wins, weights of one priority add up",
			in: Input{Name: api, Msgs: []*mdns.Msg{msg(0,
				srvs(api, 60, "0 3 80 a.example.org.", "0 4 80 b.example.org.", "1 9 80 c.example.org."),
				[]string{"a.example.org. 60 IN A 10.0.0.1", "b.example.org. 60 IN A 10.0.0.1", "c.example.org. 60 IN A 10.0.0.1"}, nil)}},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 7, 0)},
			ttl:  60 * time.Second,
		},
		{
			name: "absurd TTLs: top bit set counts as 0, huge ones clamp to a day",
			in: Input{Name: api, Msgs: []*mdns.Msg{msg(0,
				srvs(api, 2147483647, "0 1 80 a.example.org."), []string{"a.example.org. 2147483647 IN A 10.0.0.1"}, nil)}},
			want: []sources.Endpoint{ep("10.0.0.1", 80, 1, 0)},
			ttl:  maxTTL,
		},
		{
			name: "host entry: one endpoint per address",
			in: Input{Kind: KindHost, Name: "web.example.org.", Port: 8080, Msgs: []*mdns.Msg{
				msg(0, []string{"web.example.org. 30 IN A 10.0.0.1", "web.example.org. 30 IN A 10.0.0.2"}, nil, nil),
				msg(0, []string{"web.example.org. 20 IN AAAA 2001:db8::5"}, nil, nil),
			}},
			want: []sources.Endpoint{ep("10.0.0.1", 8080, 1, 0), ep("10.0.0.2", 8080, 1, 0), ep("2001:db8::5", 8080, 1, 0)},
			ttl:  20 * time.Second,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Convert(tc.in)
			if !slices.EqualFunc(got.Endpoints, tc.want, sources.Endpoint.Equal) {
				t.Errorf("endpoints:\n got %v\nwant %v", got.Endpoints, tc.want)
			}
			if got.Dropped != tc.dropped {
				t.Errorf("dropped = %d, want %d", got.Dropped, tc.dropped)
			}
			if got.TTL != tc.ttl {
				t.Errorf("TTL = %s, want %s", got.TTL, tc.ttl)
			}
		})
	}
}

func TestConvertTopBitTTL(t *testing.T) {
	m := msg(0, srvs(api, 60, "0 1 80 a.example.org."), []string{"a.example.org. 60 IN A 10.0.0.1"}, nil)
	m.Answer[0].Header().Ttl = 1 << 31
	if got := Convert(Input{Name: api, Msgs: []*mdns.Msg{m}}); got.TTL != 0 || len(got.Endpoints) != 1 {
		t.Fatalf("got TTL %s with %d endpoints, want 0 with 1", got.TTL, len(got.Endpoints))
	}
}

func TestConvertRecordCap(t *testing.T) {
	var answer, extra []string
	n := MaxRecords + 500
	for i := range n {
		target := fmt.Sprintf("t%d.example.org.", i)
		answer = append(answer, fmt.Sprintf("%s 60 IN SRV %d 1 80 %s", api, i%3, target))
		extra = append(extra, fmt.Sprintf("%s 60 IN A 10.%d.%d.%d", target, i>>16&255, i>>8&255, i&255))
	}
	got := Convert(Input{Name: api, Msgs: []*mdns.Msg{msg(0, answer, extra, nil)}})
	if len(got.Endpoints) != MaxRecords || got.Dropped != n-MaxRecords {
		t.Fatalf("got %d endpoints, %d dropped; want %d and %d", len(got.Endpoints), got.Dropped, MaxRecords, n-MaxRecords)
	}
	checkInvariants(t, got)
}

func TestConvertWeightOverflow(t *testing.T) {
	// 500 weight-0 records and 500 of weight 65535: scaled by 500 the sum
	// would pass 2^32-1, which Envoy rejects within one locality.
	var answer, extra []string
	for i := range 1000 {
		target := fmt.Sprintf("t%d.example.org.", i)
		answer = append(answer, fmt.Sprintf("%s 60 IN SRV 0 %d 80 %s", api, (i%2)*65535, target))
		extra = append(extra, fmt.Sprintf("%s 60 IN A 10.0.%d.%d", target, i>>8, i&255))
	}
	got := Convert(Input{Name: api, Msgs: []*mdns.Msg{msg(0, answer, extra, nil)}})
	checkInvariants(t, got)
	var sum uint64
	for _, e := range got.Endpoints {
		sum += uint64(e.Weight)
	}
	if sum > 1<<32-1 || len(got.Endpoints) != 1000 {
		t.Fatalf("sum of weights %d over %d endpoints", sum, len(got.Endpoints))
	}
}

// checkInvariants asserts what every Result promises.
func checkInvariants(t testing.TB, r Result) {
	t.Helper()
	if len(r.Endpoints) > MaxEndpoints {
		t.Fatalf("%d endpoints, more than %d", len(r.Endpoints), MaxEndpoints)
	}
	sums := map[uint32]uint64{}
	prev := -1
	for i, e := range r.Endpoints {
		if err := e.Validate(); err != nil {
			t.Fatalf("endpoint %d: %v", i, err)
		}
		if e.Weight == 0 {
			t.Fatalf("endpoint %d has weight 0", i)
		}
		if int(e.Priority) != prev && int(e.Priority) != prev+1 {
			t.Fatalf("priorities not contiguous from 0 or not sorted at endpoint %d: %v", i, r.Endpoints)
		}
		prev = int(e.Priority)
		sums[e.Priority] += uint64(e.Weight)
		if i > 0 && r.Endpoints[i-1].Compare(e) >= 0 {
			t.Fatalf("endpoints not sorted or duplicated at %d", i)
		}
	}
	for p, s := range sums {
		if s > 1<<32-1 {
			t.Fatalf("priority %d weights sum to %d", p, s)
		}
	}
	if r.Dropped < 0 || r.TTL < 0 || r.TTL > maxTTL {
		t.Fatalf("dropped %d, TTL %s", r.Dropped, r.TTL)
	}
}
