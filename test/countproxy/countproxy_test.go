package countproxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHTTPCountsRequestsAndResetsWhenUpstreamIsDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	p, err := HTTP(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for range 3 { // one kept-alive connection, three requests
		resp, err := c.Get("http://" + p.Addr + "/v1/x")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := p.Counts(); got.Requests != 3 || got.Conns != 1 || got.Refused != 0 {
		t.Fatalf("counts %+v, want 3 requests on 1 connection", got)
	}

	// The dependency goes away: the kept-alive connection is reset, a new
	// one is refused, and both count as attempts.
	before := p.Counts()
	dead := deadAddr(t)
	p.SetUpstream(dead)
	p.Cut()
	tr.CloseIdleConnections()
	if resp, err := c.Get("http://" + p.Addr + "/v1/x"); err == nil {
		resp.Body.Close()
		t.Fatal("a request through a proxy whose upstream is down succeeded")
	}
	if got := p.Counts().Sub(before); got.Attempts() != 1 || got.Refused != 1 {
		t.Fatalf("counts while down %+v, want 1 refused attempt", got)
	}
}

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestFramers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      framer
		pieces []string
		want   int
	}{
		{"http heads split across feeds", &httpHeads{}, []string{"GET /a HTTP/1.1\r\nHost: x\r", "\n\r", "\nGET /b HTTP/1.1\r\n\r\n"}, 2},
		{"http partial head", &httpHeads{}, []string{"GET /a HTTP/1.1\r\nHost: x\r\n"}, 0},
		{"dns frames split across feeds", &dnsFrames{}, []string{"\x00", "\x03ab", "c\x00\x01z\x00", "\x00"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for _, p := range tc.pieces {
				n += tc.f.feed([]byte(p))
			}
			if n != tc.want {
				t.Fatalf("counted %d, want %d", n, tc.want)
			}
		})
	}
}

func TestDNSRelaysUDP(t *testing.T) {
	up, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := up.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = up.WriteTo(append([]byte("re:"), buf[:n]...), from)
		}
	}()
	p, err := DNS(up.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("udp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "re:q" {
		t.Fatalf("answer %q, %v", buf[:n], err)
	}
	if got := p.Counts().Requests; got != 1 {
		t.Fatalf("%d requests counted, want 1", got)
	}
}

// TestRefusals: a connection counts as refused when the upstream's first
// answer on it is a 429, however the bytes arrive; a 429 after another
// answer on the same connection is not a refused connection.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []string
		want   int64
	}{
		{"429 split across writes", []string{"HTTP/1.1 4", "29 Too Many Requests\r\n\r\n"}, 1},
		{"429 over HTTP/1.0", []string{"HTTP/1.0 429 Too Many Requests\r\n\r\n"}, 1},
		{"429 after an answer", []string{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 429 Too Many Requests\r\n\r\n"}, 0},
		{"short answer", []string{"HTTP/1.1 4"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			r := &refusal{w: io.Discard, n: &n}
			for _, p := range tc.pieces {
				if _, err := r.Write([]byte(p)); err != nil {
					t.Fatal(err)
				}
			}
			if got := n.Load(); got != tc.want {
				t.Fatalf("counted %d, want %d", got, tc.want)
			}
		})
	}
}

// TestHTTPCountsRefusedConnections: answers 429 from the upstream, each
// on a connection of its own, are counted through the proxy.
func TestHTTPCountsRefusedConnections(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	p, err := HTTP(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for range 2 {
		resp, err := c.Get("http://" + p.Addr + "/v1/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := p.Counts(); got.TooMany != 2 {
		t.Fatalf("counts %+v, want 2 connections refused with 429", got)
	}
}
