package dns

import (
	"testing"

	mdns "github.com/miekg/dns"
)

// FuzzConvert feeds arbitrary wire-format responses to Convert: it must
// never panic, and its result must keep every promise (valid endpoints,
// weights >= 1 summing within Envoy's limit, priorities contiguous from
// 0, bounded counts and TTLs). The seeds run in the regular suite; in CI:
//
//	go test -run='^$' -fuzz='^FuzzConvert$' -fuzztime=20s ./sources/dns/
func FuzzConvert(f *testing.F) {
	soa := "example.org. 300 IN SOA ns.example.org. admin.example.org. 1 60 60 600 30"
	seeds := []struct {
		kind   uint8
		family uint8
		port   uint16
		first  *mdns.Msg
		second *mdns.Msg
	}{
		{0, 0, 0, msg(0, srvs(api, 60, "10 0 8080 a.example.org.", "10 10 8081 b.example.org.", "20 60 8082 c.example.org."),
			[]string{"a.example.org. 30 IN A 10.0.0.1", "b.example.org. 30 IN AAAA 2001:db8::2", "c.example.org. 30 IN CNAME a.example.org."}, nil), nil},
		{0, 1, 0, msg(0, srvs(api, 60, "0 1 80 alias.example.org."), nil, nil),
			msg(0, []string{"alias.example.org. 20 IN CNAME alias.example.org.", "real.example.org. 50 IN A 10.1.1.1"}, nil, nil)},
		{0, 0, 0, msg(0, srvs(api, 45, "0 0 0 ."), nil, nil), nil},
		{0, 2, 0, msg(mdns.RcodeNameError, nil, nil, []string{soa}), nil},
		{0, 0, 0, msg(0, srvs(api, 60, "0 65535 80 a.example.org.", "0 0 80 a.example.org.", "0 0 0 b.example.org."),
			[]string{"a.example.org. 4294967295 IN A 0.0.0.0", "a.example.org. 60 IN A 10.0.0.1", "b.example.org. 60 IN A 10.0.0.2"}, nil), nil},
		{1, 0, 8080, msg(0, []string{"web.example.org. 30 IN A 10.0.0.1", "web.example.org. 30 IN A 10.0.0.2"}, nil, nil),
			msg(0, []string{"web.example.org. 20 IN AAAA ::ffff:10.0.0.3"}, nil, nil)},
	}
	for i, s := range seeds {
		q := api
		if s.kind == 1 {
			q = "web.example.org."
		}
		s.first.SetQuestion(q, mdns.TypeSRV)
		a, err := s.first.Pack()
		if err != nil {
			f.Fatalf("seed %d: %v", i, err)
		}
		var b []byte
		if s.second != nil {
			if b, err = s.second.Pack(); err != nil {
				f.Fatalf("seed %d: %v", i, err)
			}
		}
		f.Add(s.kind, s.family, s.port, a, b, []byte(nil))
	}
	f.Add(uint8(0), uint8(0), uint16(0), []byte(nil), []byte(nil),
		[]byte{0, 0, 1, 0, 10, 0, 0, 0, 80, 0, 1, 1, 0, 0, 3, 0, 2, 1, 2, 1, 2, 2, 0, 0, 3, 1, 9, 9, 9, 9})

	f.Fuzz(func(t *testing.T, kind, family uint8, port uint16, first, second, records []byte) {
		in := Input{Kind: Kind(kind % 2), Family: Family(family % 3), Port: uint32(port), Name: api}
		for _, b := range [][]byte{first, second} {
			m := new(mdns.Msg)
			if err := m.Unpack(b); err != nil {
				continue
			}
			if len(m.Question) > 0 && len(in.Msgs) == 0 {
				in.Name = m.Question[0].Name
			}
			in.Msgs = append(in.Msgs, m)
		}
		if g := generated(records); g != nil {
			in.Msgs = append(in.Msgs, g)
		}
		res := Convert(in)
		checkInvariants(t, res)
		if in.Kind == KindHost {
			for _, e := range res.Endpoints {
				if e.Port != uint32(port) || e.Priority != 0 {
					t.Fatalf("host endpoint %+v, want port %d priority 0", e, port)
				}
			}
		}
		if n := len(res.Endpoints); n > 0 && res.Endpoints[n-1].Priority >= uint32(n) {
			t.Fatalf("priority %d with %d endpoints", res.Endpoints[n-1].Priority, n)
		}
	})
}

// generated decodes b into a response whose records use a handful of
// names, so that the fuzzer reaches CNAME chains and loops, shared
// targets, weight mixes and duplicates far more often than through random
// wire bytes. Each record takes 6 bytes: type, owner, then 4 bytes of data.
func generated(b []byte) *mdns.Msg {
	if len(b) < 6 {
		return nil
	}
	names := []string{api, "a.example.org.", "b.example.org.", "c.example.org.", "web.example.org.", "."}
	name := func(x byte) string { return names[int(x)%len(names)] }
	m := new(mdns.Msg)
	for ; len(b) >= 6; b = b[6:] {
		owner := name(b[1])
		hdr := func(t uint16) mdns.RR_Header {
			return mdns.RR_Header{Name: owner, Rrtype: t, Class: mdns.ClassINET, Ttl: uint32(b[5]) << (b[4] % 32)}
		}
		var rr mdns.RR
		switch b[0] % 4 {
		case 0:
			rr = &mdns.SRV{Hdr: hdr(mdns.TypeSRV), Priority: uint16(b[2] % 4), Weight: uint16(b[3]) * uint16(b[4]), Port: uint16(b[4]) << 8, Target: name(b[5])}
		case 1:
			rr = &mdns.A{Hdr: hdr(mdns.TypeA), A: []byte{b[2], b[3], b[4], b[5]}}
		case 2:
			rr = &mdns.AAAA{Hdr: hdr(mdns.TypeAAAA), AAAA: []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b[2], b[3], b[4], b[5]}}
		case 3:
			rr = &mdns.CNAME{Hdr: hdr(mdns.TypeCNAME), Target: name(b[2])}
		}
		if b[3]%2 == 0 {
			m.Answer = append(m.Answer, rr)
		} else {
			m.Extra = append(m.Extra, rr)
		}
	}
	return m
}
