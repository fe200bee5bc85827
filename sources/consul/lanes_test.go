package consul

import (
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWatchSeesSilentChange: a change no bulk query attributes (a second
// instance registered without checks: the catalog's names and tags and
// the non-passing checks stay the same) reaches the served state through
// the service's watch, without a sweep. Without watches it waits for a
// sweep, which an unmoving catalog never asks for.
func TestWatchSeesSilentChange(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("watch=%v", watch), func(t *testing.T) {
			f, addr := newFakeConsul(t)
			f.set(func() {
				f.entries = svcEntries(1)
				f.catalog = map[string][]string{"svc": {}}
				f.catIndex = 5
			})
			r := startSource(t, nil, map[string]any{"address": addr, "watch": watch})
			r.synced(patience)
			r.waitFor(patience, "svc with 1 endpoint", func() bool { return len(r.endpointsOf("svc")) == 1 })
			if watch {
				waitFor(t, patience, "the watch of svc waiting", func() bool { return f.blockedNow() == 1 })
			}
			f.set(func() { f.index++; f.entries = svcEntries(1, 2) })
			served := func() bool { return len(r.endpointsOf("svc")) == 2 }
			if watch {
				took := r.waitFor(patience, "the silent change", served)
				t.Logf("served %v after the change", took.Round(time.Millisecond))
				return
			}
			// The control: observed for a second, it must stay unserved.
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for end := time.Now().Add(time.Second); time.Now().Before(end); <-tick.C {
				if served() {
					t.Fatal("without watches the silent change was served although nothing asked for a sweep")
				}
			}
		})
	}
}

// TestWatchLanes: watches use the connections max_connections (by default
// three quarters of the agent's per-client limit) leaves, and never more:
// over HTTP/2 each carries watches_per_connection of them (all the
// services when they fit, as many as fit otherwise), filling one before
// opening the next; over HTTP/1.1 each carries one.
func TestWatchLanes(t *testing.T) {
	// The HTTP/2 cases watch 20 services per connection
	// (watches_per_connection) rather than 200, so that they read tens of
	// services, not thousands: the lanes fill the same way.
	cases := []struct {
		name                         string
		http2                        bool
		maxConns, services, watching int
		perConn                      int    // watches_per_connection (0: the default 200)
		streams                      uint32 // the server's stream limit (0: Go's 250)
		// agentLimit is the agent's http_max_conns_per_client (0: 200);
		// maxOpen bounds the connections open at once.
		agentLimit, maxOpen int
	}{
		// 5 connections: one for everything else, 4 lanes of 20.
		{"HTTP/2, room for all", true, 5, 60, 60, 20, 0, 0, 5},
		{"HTTP/2, more services than room", true, 5, 100, 80, 20, 0, 0, 5},
		// A server allowing 6 streams per connection (a proxy in front
		// of the agent, say): 4 lanes of at most 6.
		{"HTTP/2, fewer streams than watches_per_connection", true, 5, 30, 24, 20, 6, 0, 5},
		// 14 connections: 8 reads, 3 bulk queries and the probe hold 12.
		{"HTTP/1.1", false, 14, 50, 2, 0, 0, 0, 14},
		// By default: 150 of the agent's 200, of which 149 carry
		// watches of 200 each, filled in order: 250 watches on 2
		// connections.
		{"HTTP/2, default", true, 0, 250, 250, 0, 0, 0, 3},
		// By default: 30 of the agent's 40; 12 for the rest, 18 watches.
		{"HTTP/1.1, default", false, 0, 50, 18, 0, 0, 40, 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := startFakeConsul(t, tc.http2, tc.streams)
			catalog := map[string][]string{}
			for i := range tc.services {
				catalog[fmt.Sprintf("s%04d", i)] = []string{}
			}
			// Watches are held as long as a real agent holds them (the
			// test ends first): a fake answering every 2 s would move
			// the server's streams from one watch to another all the
			// time, which a real agent does once per wait.
			f.set(func() { f.catalog, f.catIndex, f.maxConns, f.hold = catalog, 5, tc.agentLimit, 10*time.Minute })
			cfg := map[string]any{"address": srv.Listener.Addr().String()}
			if tc.maxConns > 0 {
				cfg["max_connections"] = tc.maxConns
			}
			if tc.perConn > 0 {
				cfg["watches_per_connection"] = tc.perConn
			}
			if tc.streams > 0 {
				// A watch waits four times this for a stream; long
				// enough that a starved machine does not give up
				// watches the server has room for, short enough for a
				// test.
				cfg["read_timeout"] = "1s"
			}
			if tc.http2 {
				ca := filepath.Join(t.TempDir(), "ca.pem")
				pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
				if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
					t.Fatal(err)
				}
				cfg["scheme"] = "https"
				cfg["tls"] = map[string]any{"ca_file": ca}
			}
			var cc connCounter
			r := startSource(t, nil, cfg, func(s *Source) { s.dial = cc.dial })
			r.synced(patience)
			want := fmt.Sprintf("%d of %d services watched", tc.watching, tc.services)
			if tc.streams > 0 {
				// A watch is given up as queued for a stream after four
				// read_timeouts without being sent; on a starved machine
				// one that would have got a stream may be given up too,
				// lowering its lane's room. So the outcome asserted is
				// that every watch the status counts is one the server
				// holds, and no lane holds more than the server allows.
				var held int
				var said string
				defer func() {
					if t.Failed() {
						t.Logf("last seen: the server held %d watches; the status said %q", held, said)
					}
				}()
				waitFor(t, patience, fmt.Sprintf("at most %d watches, each held by the server, and the status saying so", tc.watching), func() bool {
					held, said = f.blockedNow(), r.status.Snapshot().Notes["watches"]
					return held > 0 && held <= tc.watching && strings.Contains(said, fmt.Sprintf("%d of %d services watched", held, tc.services))
				})
			} else {
				waitFor(t, patience, fmt.Sprintf("%d watches waiting, and the status saying so", tc.watching), func() bool {
					return f.blockedNow() == tc.watching && strings.Contains(r.status.Snapshot().Notes["watches"], want)
				})
			}
			note := r.status.Snapshot().Notes["watches"]
			if strings.Contains(note, "HTTP/2 connections") != tc.http2 {
				t.Errorf("status note %q, want %q over HTTP/2 %v", note, want, tc.http2)
			}
			// Plain HTTP that leaves services unwatched says what to do.
			if advised, want := strings.Contains(note, "HTTPS listener"), !tc.http2 && tc.watching < tc.services; advised != want {
				t.Errorf("status note %q: advice given %v, want %v", note, advised, want)
			}
			_, maxOpen, total := cc.figures()
			t.Logf("%s; at most %d connections open (%d dialled)", note, maxOpen, total)
			if maxOpen > tc.maxOpen {
				t.Errorf("%d connections open at once, want at most %d", maxOpen, tc.maxOpen)
			}
		})
	}
}

func (f *fakeConsul) blockedNow() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked
}
