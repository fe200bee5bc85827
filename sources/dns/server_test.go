package dns

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

// fakeServer is an in-process DNS server on 127.0.0.1 (UDP and TCP on one
// port) whose answers the test sets per name and type.
type fakeServer struct {
	addr string

	mu      sync.Mutex
	replies map[qkey]reply
	queries []query
}

type qkey struct {
	name  string
	qtype uint16
}

type query struct {
	qkey
	net string
	at  time.Time
}

// reply is how the server answers one name and type. Records are in zone
// file syntax. Names without a reply get NXDOMAIN.
type reply struct {
	rcode     int
	answer    []string
	extra     []string
	ns        []string
	truncUDP  bool // over UDP, answer with TC set and no records
	silent    bool // never answer
	wrongQ    bool // answer a different question
	garbage   bool // answer bytes that do not parse
	failFirst int  // answer SERVFAIL to the first failFirst queries
	flap      bool // answer NXDOMAIN to every second query, from the second
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{replies: map[qkey]reply{}}
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for range 20 {
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatalf("finding a port free for UDP and TCP: %v", err)
	}
	f.addr = pc.LocalAddr().String()
	for _, srv := range []*mdns.Server{{PacketConn: pc, Handler: f}, {Listener: ln, Handler: f}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = srv.ActivateAndServe()
		}()
		<-started
		t.Cleanup(func() {
			_ = srv.Shutdown()
			<-done
		})
	}
	return f
}

func (f *fakeServer) set(name string, qtype uint16, r reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies[qkey{mdns.CanonicalName(name), qtype}] = r
}

// count returns how many queries for name and type arrived (over net, or
// any when net is "").
func (f *fakeServer) count(name string, qtype uint16, network string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, q := range f.queries {
		if q.name == mdns.CanonicalName(name) && q.qtype == qtype && (network == "" || q.net == network) {
			n++
		}
	}
	return n
}

func (f *fakeServer) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	if len(req.Question) != 1 {
		return
	}
	q := req.Question[0]
	k := qkey{mdns.CanonicalName(q.Name), q.Qtype}
	network := w.RemoteAddr().Network()
	f.mu.Lock()
	seen := 0
	for _, q := range f.queries {
		if q.qkey == k {
			seen++
		}
	}
	f.queries = append(f.queries, query{qkey: k, net: network, at: time.Now()})
	r, ok := f.replies[k]
	f.mu.Unlock()
	switch {
	case seen < r.failFirst:
		r = reply{rcode: mdns.RcodeServerFailure}
	case r.flap && seen%2 == 1:
		r = reply{rcode: mdns.RcodeNameError}
	}
	if r.silent {
		return
	}
	m := new(mdns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if !ok {
		m.Rcode = mdns.RcodeNameError
		_ = w.WriteMsg(m)
		return
	}
	m.Rcode = r.rcode
	if r.garbage {
		_, _ = w.Write([]byte{byte(req.Id >> 8), byte(req.Id), 0x81, 0x80, 0, 1, 0, 9, 0, 0, 0, 0, 3, 'a'})
		return
	}
	if r.wrongQ {
		m.Question[0].Name = "other.example.org."
	}
	if r.truncUDP && network == "udp" {
		m.Truncated = true
		_ = w.WriteMsg(m)
		return
	}
	m.Answer = mustRRs(r.answer)
	m.Extra = mustRRs(r.extra)
	m.Ns = mustRRs(r.ns)
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(opt.UDPSize(), false)
	}
	_ = w.WriteMsg(m)
}

func mustRRs(ss []string) []mdns.RR {
	var out []mdns.RR
	for _, s := range ss {
		rr, err := mdns.NewRR(s)
		if err != nil {
			panic("bad test record " + s + ": " + err.Error())
		}
		out = append(out, rr)
	}
	return out
}

// srvs returns SRV records for name in zone file syntax: each spec is
// "priority weight port target".
func srvs(name string, ttl int, specs ...string) []string {
	var out []string
	for _, s := range specs {
		out = append(out, name+" "+strconv.Itoa(ttl)+" IN SRV "+s)
	}
	return out
}
