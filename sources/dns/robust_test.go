package dns

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

func TestOverTCP(t *testing.T) {
	for _, tt := range []struct {
		transport, name, srv string
		want                 bool
	}{
		{TransportAuto, "web.service.consul.", "127.0.0.1:53", true},
		{TransportAuto, "_web._tcp.service.dc1.consul.", "127.0.0.1:53", true},
		{TransportAuto, "web.example.org.", "127.0.0.1:8600", true},
		{TransportAuto, "web.example.org.", "127.0.0.1:53", false},
		{TransportAuto, "consul.example.org.", "127.0.0.1:53", false},
		{TransportUDP, "web.service.consul.", "127.0.0.1:8600", false},
		{TransportTCP, "web.example.org.", "127.0.0.1:53", true},
	} {
		r := &resolver{transport: tt.transport}
		if got := r.overTCP(tt.name, tt.srv); got != tt.want {
			t.Errorf("%s: overTCP(%s, %s) = %v, want %v", tt.transport, tt.name, tt.srv, got, tt.want)
		}
	}
}

func testResolver(servers []string, transport string, attempts int) *resolver {
	return &resolver{
		servers:   servers,
		udp:       &mdns.Client{Net: "udp", UDPSize: 1232, Timeout: queryTimeout},
		tcp:       &mdns.Client{Net: "tcp", Timeout: queryTimeout},
		ednsSize:  1232,
		transport: transport,
		attempts:  attempts,
	}
}

func TestResolverTriesEachServerMoreThanOnce(t *testing.T) {
	f := newFakeServer(t)
	name := "_api._tcp.example.org."
	f.set(name, mdns.TypeSRV, reply{answer: srvs(name, 60, "0 1 80 a.example.org."),
		extra: []string{"a.example.org. 60 IN A 10.0.0.1"}, failFirst: 1})
	e := entry{cluster: "api", kind: KindSRV, name: name}
	if _, err := lookup(t.Context(), testResolver([]string{f.addr}, TransportUDP, 1), e, FamilyAny); err == nil {
		t.Fatal("one attempt survived a SERVFAIL")
	}
	f.set(name, mdns.TypeSRV, reply{answer: srvs(name, 60, "0 1 80 a.example.org."),
		extra: []string{"a.example.org. 60 IN A 10.0.0.1"}, failFirst: 2})
	res, err := lookup(t.Context(), testResolver([]string{f.addr}, TransportUDP, 2), e, FamilyAny)
	if err != nil || len(res.Endpoints) != 1 {
		t.Fatalf("lookup with a second attempt: %v, %+v", err, res)
	}
}

func TestResolverUsesTCPForConsul(t *testing.T) {
	f := newFakeServer(t)
	name := "web.service.consul."
	f.set(name, mdns.TypeSRV, reply{answer: srvs(name, 0, "1 1 8080 a.node.dc1.consul."),
		extra: []string{"a.node.dc1.consul. 0 IN A 10.0.0.1"}})
	e := entry{cluster: "web", kind: KindSRV, name: name}
	if _, err := lookup(t.Context(), testResolver([]string{f.addr}, TransportAuto, 2), e, FamilyAny); err != nil {
		t.Fatal(err)
	}
	if udp, tcp := f.count(name, mdns.TypeSRV, "udp"), f.count(name, mdns.TypeSRV, "tcp"); udp != 0 || tcp != 1 {
		t.Errorf("queries: %d over UDP, %d over TCP; want TCP only", udp, tcp)
	}
}

func TestSystemConfReread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("nameserver 10.0.0.1\nsearch a.example\n")
	c, err := loadSystem(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	c.now = func() time.Time { return clock }
	servers := func() []string { s, _ := c.get(); return s }
	write("nameserver 10.0.0.2\nnameserver 10.0.0.3\n")
	if got := servers(); !slices.Equal(got, []string{"10.0.0.1:53"}) {
		t.Errorf("servers re-read before %v passed: %v", recheckConf, got)
	}
	clock = clock.Add(recheckConf)
	if got := servers(); !slices.Equal(got, []string{"10.0.0.2:53", "10.0.0.3:53"}) {
		t.Errorf("servers after the change: %v", got)
	}
	write("# nothing usable\n")
	clock = clock.Add(recheckConf)
	if got := servers(); !slices.Equal(got, []string{"10.0.0.2:53", "10.0.0.3:53"}) {
		t.Errorf("servers after a change to nothing usable: %v, want the last good ones", got)
	}
}
