package faults

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/test/procstat"
)

// The HTTP source's pacing in these tests: a poll every httpInterval; a
// failed one retried after the source's backoff, which starts at the
// interval (when it is a second or less) and stays there.
const (
	httpInterval = 500 * time.Millisecond
	httpTimeout  = time.Second
)

// registry is an HTTP registry whose answer a test sets: a document, or a
// fault. It counts the requests it is sent and the bytes it answers.
type registry struct {
	*httptest.Server
	requests atomic.Int64
	sent     atomic.Int64

	mu    sync.Mutex
	fault string // "" serves doc; else one of the faults below
	doc   string
	hang  chan struct{}
}

// The faults a registry can show.
const (
	answer500 = "500"
	hanging   = "hang"
	huge      = "1 GiB"
	garbled   = "invalid JSON"
)

func startRegistry(t *testing.T, doc string) *registry {
	t.Helper()
	r := &registry{doc: doc, hang: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.set("", r.doc) // ends every hanging request
		r.Close()
	})
	return r
}

// set changes the answer; leaving the hanging fault ends the requests that
// hang.
func (r *registry) set(fault, doc string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fault == hanging && fault != hanging {
		close(r.hang)
		r.hang = make(chan struct{})
	}
	r.fault, r.doc = fault, doc
}

func (r *registry) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	r.mu.Lock()
	fault, doc, hang := r.fault, r.doc, r.hang
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch fault {
	case answer500:
		http.Error(w, "registry unavailable", http.StatusInternalServerError)
	case hanging:
		select {
		case <-hang:
		case <-req.Context().Done():
		}
	case huge:
		// A document that never ends: 1 GiB of one service's endpoints,
		// written as fast as the bridge reads.
		chunk := bytes.Repeat([]byte(`{"address":"10.9.9.9","port":1},`), 32<<10/32)
		n, _ := w.Write([]byte(`{"services":[{"name":"huge","endpoints":[`))
		r.sent.Add(int64(n))
		for written := int64(0); written < 1<<30; written += int64(len(chunk)) {
			n, err := w.Write(chunk)
			r.sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	case garbled:
		_, _ = w.Write([]byte(`{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 80`))
	default:
		_, _ = w.Write([]byte(doc))
	}
}

func httpDoc(services ...string) string {
	doc := `{"services": [`
	for i, s := range services {
		if i > 0 {
			doc += ","
		}
		doc += s
	}
	return doc + "]}"
}

func httpService(name, addr string, port int) string {
	return fmt.Sprintf(`{"name": %q, "endpoints": [{"address": %q, "port": %d}]}`, name, addr, port)
}

// TestHTTPFaults breaks an HTTP registry four ways, one after the other on
// one bridge: it answers 500, hangs, sends 1 GiB, sends invalid JSON.
// During each the bridge keeps the last good state, shows the source
// stale, logs once, and polls no faster than its backoff; the 1 GiB answer
// is read no further than max_body_bytes. After each, the registry's new
// document reaches the watcher.
func TestHTTPFaults(t *testing.T) { //nolint:tparallel // its subtests are the steps of one fault, in order; the test runs beside the other faults
	t.Parallel()
	doc := httpDoc(httpService("web", "10.0.0.1", 80), httpService("api", "10.0.0.2", 8080))
	reg := startRegistry(t, doc)
	b := startBridge(t, t.TempDir(), fmt.Sprintf(`  - name: http
    type: http
    url: %s/services
    interval: %s
    timeout: %s
`, reg.URL, httpInterval, httpTimeout), bridgeOptions{})
	w := startWatcher(t, b.xds)
	w.waitHolds("the registry's services", view{"web": {"10.0.0.1:80"}, "api": {"10.0.0.2:8080"}})
	b.baseline()
	base, err := procstat.Read(b.pid())
	if err != nil {
		t.Fatal(err)
	}

	for i, fault := range []string{answer500, hanging, huge, garbled} {
		t.Run(fault, func(t *testing.T) {
			defer b.in(t)()
			defer w.in(t)()
			w.guard()
			before := reg.requests.Load()
			start := time.Now()
			mark := b.logMark()
			reg.set(fault, doc)
			b.waitStatus("http", "stale after 3 failed polls", func(s manager.SourceStatus) bool {
				return s.Stale && s.Failures >= 3 && s.LastError != ""
			})
			n, d := reg.requests.Load()-before, time.Since(start)
			// The poll in flight as the fault began, then what the
			// backoff allows; a hanging poll only ends at the timeout, so
			// it makes fewer.
			limit := paced(httpInterval, httpInterval, d) + 1
			t.Logf("%s: %d requests in %s; at most %d allowed", fault, n, d.Round(time.Millisecond), limit)
			if n > limit {
				t.Errorf("%s: %d requests in %s, more than the %d the backoff allows", fault, n, d, limit)
			}
			if fault == huge {
				// What the bridge read of the endless answers: at most
				// max_body_bytes (10 MiB) each, plus what the sockets'
				// buffers held, never the whole.
				if sent := reg.sent.Load(); sent > n*(10<<20+8<<20) {
					t.Errorf("the registry sent %d MiB of its 1 GiB answers in %d requests", sent>>20, n)
				}
				if s, err := procstat.Read(b.pid()); err == nil && s.RSS > base.RSS+256<<20 {
					t.Errorf("the bridge's RSS grew from %d MiB to %d MiB reading 1 GiB answers", base.RSS>>20, s.RSS>>20)
				}
			}
			if lines := b.problems(mark, "http"); len(lines) > 1 {
				t.Errorf("%d warnings about the source during the fault, want 1: %v", len(lines), lines)
			}
			w.release()

			// The registry answers again, with one more endpoint.
			ip := fmt.Sprintf("10.0.1.%d", i+1)
			doc = httpDoc(httpService("web", "10.0.0.1", 80), httpService("api", "10.0.0.2", 8080), httpService("new", ip, 80))
			reg.set("", doc)
			w.wait("the registry's new service", func(v view) bool { return len(v["new"]) == 1 && v["new"][0] == ip+":80" })
			b.waitStatus("http", "fresh again", func(s manager.SourceStatus) bool { return !s.Stale })
		})
	}
	b.settled()
}
