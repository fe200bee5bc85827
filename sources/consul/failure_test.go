package consul

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// fakeConsul serves the four endpoints the source reads, with blocking
// queries, and can be switched into the failure modes a real cluster shows
// (leaderless 500s, malformed JSON, 429) and into resetting its index.
type fakeConsul struct {
	mu       sync.Mutex
	mode     string // "ok", "leaderless", "garbage", "throttle"
	index    uint64
	entries  []*api.ServiceEntry
	changed  chan struct{}
	requests int
	seen     []*http.Request // every request's URL and header
	svcIndex uint64          // when set, the index of service reads
	catalog  map[string][]string
	// Failures of some paths only: hung paths get no answer until
	// unhung (or the request is cancelled); throttled paths get 429.
	hung      map[string]bool
	unhung    chan struct{}
	throttled map[string]bool
	// cut: every connection is closed without an answer, as an agent
	// that exits does.
	cut bool
	// token, when set, is the only token accepted: others get 403.
	token string
	// checks is the answer of /v1/health/state/any; catIndex, when set,
	// the index of /v1/catalog/services.
	checks   []*api.HealthCheck
	catIndex uint64
	// headers are set on every answer (after the defaults).
	headers map[string]string
	// blocked counts the blocking service reads (watches) waiting now;
	// hold is how long a blocking query waits for a change (0: 2 s,
	// shorter than any wait the source asks for, so that tests see
	// renewals).
	blocked int
	hold    time.Duration
	// nodeID is the agent's node ID in /v1/agent/self, maxConns its
	// http_max_conns_per_client there (0: Consul's default, 200).
	nodeID   string
	maxConns int
}

// indexOf returns the index the fake answers path with; the caller holds
// f.mu.
func (f *fakeConsul) indexOf(path string) uint64 {
	switch {
	case f.svcIndex != 0 && path == "/v1/health/service/svc":
		return f.svcIndex
	case f.catIndex != 0 && path == "/v1/catalog/services":
		return f.catIndex
	}
	return f.index
}

func newFakeConsul(t *testing.T) (*fakeConsul, string) {
	t.Helper()
	f, srv := startFakeConsul(t, false, 0)
	return f, srv.Listener.Addr().String()
}

// startFakeConsul starts a fake agent, over HTTPS with HTTP/2 when tls
// (srv.Certificate() is its certificate), allowing streams streams per
// connection (0: Go's default, 250).
func startFakeConsul(t *testing.T, tls bool, streams uint32) (*fakeConsul, *httptest.Server) {
	t.Helper()
	f := &fakeConsul{mode: "ok", index: 10, changed: make(chan struct{}), unhung: make(chan struct{}),
		hung: map[string]bool{}, throttled: map[string]bool{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	if tls {
		srv.EnableHTTP2 = true
		if streams > 0 {
			srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: int(streams)}
		}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		f.set(func() {}) // wake blocked requests
		f.unhang()
		srv.CloseClientConnections()
		srv.Close()
	})
	return f, srv
}

// set changes the fake's state under its lock and wakes blocked queries.
func (f *fakeConsul) set(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
	close(f.changed)
	f.changed = make(chan struct{})
}

// unhang answers the hung requests and stops hanging.
func (f *fakeConsul) unhang() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.hung)
	close(f.unhung)
	f.unhung = make(chan struct{})
}

// count returns how many requests asked for path.
func (f *fakeConsul) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.seen {
		if r.URL.Path == path {
			n++
		}
	}
	return n
}

func (f *fakeConsul) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func (f *fakeConsul) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	f.seen = append(f.seen, &http.Request{URL: r.URL, Header: r.Header.Clone()})
	if f.cut {
		f.mu.Unlock()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	if f.hung[r.URL.Path] || f.hung["*"] {
		ch := f.unhung
		f.mu.Unlock()
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
		f.mu.Lock()
	}
	if f.throttled[r.URL.Path] {
		f.mu.Unlock()
		http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
		return
	}
	if f.token != "" && r.Header.Get("X-Consul-Token") != f.token {
		f.mu.Unlock()
		http.Error(w, "ACL not found", http.StatusForbidden)
		return
	}
	want, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	if want > 0 && want == f.indexOf(r.URL.Path) && f.mode == "ok" {
		ch, hold := f.changed, cmp.Or(f.hold, 2*time.Second)
		watch := strings.HasPrefix(r.URL.Path, "/v1/health/service/")
		if watch {
			f.blocked++
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-r.Context().Done():
		case <-time.After(hold):
		}
		f.mu.Lock()
		if watch {
			f.blocked--
		}
		if r.Context().Err() != nil {
			f.mu.Unlock()
			return
		}
	}
	mode, index, entries, catalog, checks, nodeID, maxConns := f.mode, f.indexOf(r.URL.Path), f.entries, f.catalog, f.checks, f.nodeID, f.maxConns
	f.mu.Unlock()
	switch {
	case mode == "leaderless" && r.URL.Path == "/v1/status/leader":
		// As a Consul server without a leader answers (a -dev agent
		// restarting, say): an empty leader, not an error.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`""`))
		return
	case mode == "leaderless":
		http.Error(w, "No cluster leader", http.StatusInternalServerError)
		return
	case mode == "throttle":
		http.Error(w, "Your IP is issuing too many concurrent connections, please rate limit your calls", http.StatusTooManyRequests)
		return
	}
	w.Header().Set("X-Consul-Index", strconv.FormatUint(index, 10))
	w.Header().Set("X-Consul-KnownLeader", "true")
	w.Header().Set("X-Consul-LastContact", "0")
	f.mu.Lock()
	for k, v := range f.headers {
		w.Header().Set(k, v)
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if mode == "garbage" {
		_, _ = w.Write([]byte(`{"svc": [`))
		return
	}
	var body any
	switch r.URL.Path {
	case "/v1/status/leader":
		body = "127.0.0.1:8300"
	case "/v1/agent/self":
		body = map[string]any{"Config": map[string]any{"Datacenter": "dc1", "NodeID": nodeID},
			"DebugConfig": map[string]any{"HTTPMaxConnsPerClient": cmp.Or(maxConns, 200)}}
	case "/v1/catalog/services":
		body = catalog
		if catalog == nil {
			body = map[string][]string{"svc": {"prod"}}
		}
	case "/v1/health/state/any":
		body = checks
		if checks == nil {
			body = []any{}
		}
	case "/v1/catalog/nodes":
		body = []*api.Node{{Node: "n1", Address: "10.0.0.1", ModifyIndex: 5}}
	case "/v1/health/service/svc":
		body = entries
	case "/v1/health/service/other":
		body = []*api.ServiceEntry{{Node: &api.Node{Node: "n1", Address: "10.0.0.1", ModifyIndex: 5},
			Service: &api.AgentService{ID: "other-1", Service: "other", Port: 9}}}
	default:
		// Any other service of the catalog: one instance.
		if name, ok := strings.CutPrefix(r.URL.Path, "/v1/health/service/"); ok && catalog[name] != nil {
			body = []*api.ServiceEntry{{Node: &api.Node{Node: "n1", Address: "10.0.0.1", ModifyIndex: 5},
				Service: &api.AgentService{ID: name + "-1", Service: name, Port: 9}}}
			break
		}
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode(body)
}

func svcEntries(ports ...int) []*api.ServiceEntry {
	var es []*api.ServiceEntry
	for _, p := range ports {
		es = append(es, &api.ServiceEntry{Node: &api.Node{Node: "n1", Address: "10.0.0.1", ModifyIndex: 5},
			Service: &api.AgentService{ID: "svc-" + strconv.Itoa(p), Service: "svc", Port: p}})
	}
	return es
}

// TestFailures walks the source through the failures of a real cluster:
// leaderless 500s, malformed JSON, 429s. While failing nothing is
// published, the status is stale, one warning is logged, and retries back
// off; on recovery the source resyncs and publishes what changed. An index
// that goes backwards (a reset) is followed.
func TestFailures(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() { f.entries = svcEntries(1) })
	r := startSource(t, nil, map[string]any{"address": addr, "retry_min": "50ms", "retry_max": "200ms"})
	r.synced(patience)
	r.waitFor(patience, "svc with 1 endpoint", func() bool { return len(r.endpointsOf("svc")) == 1 })
	n := r.updateCount()

	for _, mode := range []string{"leaderless", "garbage", "throttle"} {
		f.set(func() {
			f.mode = mode
			f.index++
			f.entries = svcEntries(1, 2)
		})
		before := f.requestCount()
		r.waitFor(patience, mode+": failures counted", func() bool {
			return r.status.Snapshot().Stale && f.requestCount() > before+10
		})
	}
	// Backoff: with retry_max 200ms, three blocking queries retry at most
	// about 15 times a second each; a hot loop would do thousands.
	before, start := f.requestCount(), time.Now()
	waitFor(t, patience, "a second of retries", func() bool { return time.Since(start) >= time.Second })
	if got := f.requestCount() - before; got > 60 {
		t.Errorf("%d requests in a second while throttled: no backoff", got)
	}
	if got := r.updateCount(); got != n {
		t.Fatalf("%d updates published while failing", got-n)
	}
	if got := r.logs.count(msgFailing); got != 1 {
		t.Errorf("logged %q %d times over three failure modes, want once", msgFailing, got)
	}
	if s := r.status.Snapshot(); s.LastError == "" || s.Failures < 10 {
		t.Errorf("status while failing = %+v", s)
	}

	// Recovery with a reset index (a restarted cluster): resync, publish.
	f.set(func() { f.mode, f.index = "ok", 3 })
	r.waitFor(patience, "recovered with svc at 2 endpoints", func() bool {
		return !r.status.Snapshot().Stale && len(r.endpointsOf("svc")) == 2
	})
	if got := r.logs.count(msgRecovered); got != 1 {
		t.Errorf("logged %q %d times, want once", msgRecovered, got)
	}
	// The index goes backwards again without an error: still followed.
	f.set(func() { f.index, f.entries = 2, svcEntries(1, 2, 3) })
	r.waitFor(patience, "svc at 3 endpoints after an index reset", func() bool { return len(r.endpointsOf("svc")) == 3 })
}

// TestRequestOptions checks what reaches Consul: token, namespace,
// partition, stale, node meta on every query; tags, the filter expression
// and the datacenter on service reads.
func TestRequestOptions(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() { f.entries = svcEntries(1) })
	r := startSource(t, nil, map[string]any{"address": addr, "token": "tok-123", "namespace": "team-a", "partition": "part-1",
		"node_meta": map[string]any{"rack": "r1"}, "tags": []any{"prod"}, "filter": `Service.Meta.v == "2"`,
		"datacenters": []any{"dc9"}, "wait": "30s"})
	r.synced(patience)

	// The token appears in no error (errors are logged and shown by the
	// admin API): it travels in a header, never in the URL.
	f.set(func() { f.mode, f.index = "leaderless", f.index+1 })
	r.waitFor(patience, "failing", func() bool { return r.status.Snapshot().Stale })
	if e := r.status.Snapshot().LastError; strings.Contains(e, "tok-123") {
		t.Errorf("the token leaks into errors: %s", e)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	paths := map[string]bool{}
	for _, req := range f.seen {
		q := req.URL.Query()
		paths[req.URL.Path] = true
		for key, want := range map[string]string{"ns": "team-a", "partition": "part-1", "node-meta": "rack:r1", "dc": "dc9"} {
			if key == "dc" && req.URL.Path == "/v1/agent/self" {
				continue // the agent's own state, in no datacenter
			}
			if got := q.Get(key); got != want {
				t.Errorf("%s: %s=%q, want %q", req.URL.Path, key, got, want)
			}
		}
		if !q.Has("stale") {
			t.Errorf("%s: not a stale read", req.URL.Path)
		}
		if got := req.Header.Get("X-Consul-Token"); got != "tok-123" {
			t.Errorf("%s: token header %q", req.URL.Path, got)
		}
		switch req.URL.Path {
		case "/v1/health/service/svc":
			// A read, or a watch: a blocking query with its wait.
			if q.Get("tag") != "prod" || q.Get("filter") != `Service.Meta.v == "2"` || q.Has("index") != q.Has("wait") {
				t.Errorf("service read %s: want tag=prod, the filter, an index only with a wait", req.URL.RawQuery)
			}
		case "/v1/catalog/services", "/v1/catalog/nodes", "/v1/health/state/any":
			if q.Get("wait") != "30000ms" {
				t.Errorf("%s: wait=%q, want 30000ms", req.URL.Path, q.Get("wait"))
			}
		}
	}
	for _, p := range []string{"/v1/catalog/services", "/v1/catalog/nodes", "/v1/health/state/any", "/v1/health/service/svc"} {
		if !paths[p] {
			t.Errorf("no request to %s", p)
		}
	}
}

// TestIdleHeartbeat checks that an idle source still refreshes its
// Status.LastSuccess when a blocking query times out without a change, so
// that the admin API does not show a healthy source as old.
func TestIdleHeartbeat(t *testing.T) {
	f, addr := newFakeConsul(t) // blocks 2s, then answers the same index
	f.set(func() { f.entries = svcEntries(1) })
	r := startSource(t, nil, map[string]any{"address": addr, "wait": "1s"})
	r.synced(patience)
	first := r.status.Snapshot().LastSuccess
	r.waitFor(patience, "LastSuccess to advance while idle", func() bool {
		return r.status.Snapshot().LastSuccess.After(first.Add(time.Second))
	})
	if n := r.updateCount(); n != 1 {
		t.Errorf("%d updates while nothing changed, want only the first", n)
	}
}

// TestStaleReadBackwards serves a service read whose index is below the
// one already applied (a lagging server answering a stale read): it is not
// served at once, and only accepted when it stays so for a while (a reset
// cluster).
func TestStaleReadBackwards(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() { f.entries = svcEntries(1) })
	r := startSource(t, nil, map[string]any{"address": addr})
	r.synced(patience)
	r.waitFor(patience, "svc with 1 endpoint", func() bool { return len(r.endpointsOf("svc")) == 1 })
	f.set(func() { f.index, f.svcIndex, f.entries = f.index+1, 5, svcEntries(1, 2) }) // a sweep reads index 5 < 10
	start := time.Now()
	took := r.waitFor(patience, "the older read accepted in the end", func() bool { return len(r.endpointsOf("svc")) == 2 })
	if took < behindDelay*behindRetries/2 {
		t.Errorf("a read older than the applied state was served after %v", took)
	}
	t.Logf("older read accepted after %v", time.Since(start))
}

// TestOutageReset: Consul answers again after an outage (an agent that
// went away: its connections cut, as a restarting one), with fewer
// instances and without a service, refilling. The source says so: the first update after the
// outage is the whole state marked Reset, and what Consul reports from
// then on flows as it is (the removal guard, not the source, decides what
// to hold). A failed read that is not an outage (429s) marks nothing.
func TestOutageReset(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() {
		f.entries = svcEntries(1, 2)
		f.catalog = map[string][]string{"svc": {}, "other": {}}
	})
	r := startSource(t, nil, map[string]any{"address": addr, "retry_min": "50ms", "retry_max": "100ms", "on_empty": "remove",
		"read_timeout": "300ms"})
	r.synced(patience)
	r.waitFor(patience, "svc with 2 endpoints, other present", func() bool {
		_, ok := r.service("other")
		return len(r.endpointsOf("svc")) == 2 && ok
	})

	f.set(func() { f.mode, f.index = "throttle", f.index+1 })
	r.waitFor(patience, "failing with 429s", func() bool { return r.status.Snapshot().Stale })
	f.set(func() { f.mode, f.index = "ok", f.index+1 })
	r.waitFor(patience, "fresh after the 429s", func() bool { return !r.status.Snapshot().Stale })
	if n := r.resets(); n != 0 {
		t.Fatalf("%d updates marked Reset after 429s: the agent answered throughout", n)
	}

	// Away: the agent's connections are cut until the probe says so.
	f.set(func() { f.cut = true })
	r.waitFor(patience, "the probe failing", func() bool {
		return strings.Contains(r.status.Snapshot().LastError, "probing")
	})
	n := r.updateCount()
	// Back, refilling: one instance of svc missing, a new one there, other
	// missing from the catalog.
	f.set(func() {
		f.index++
		f.entries = svcEntries(2, 3)
		f.catalog = map[string][]string{"svc": {}}
		f.cut = false
	})
	r.waitFor(patience, "the refilled state", func() bool {
		_, ok := r.service("other")
		eps := r.endpointsOf("svc")
		_, has1 := eps[1]
		return !ok && !has1 && len(eps) == 2
	})
	kinds := r.kindsSince(n)
	if len(kinds) == 0 || kinds[0] != (updateKind{full: true, reset: true}) {
		t.Fatalf("updates after the outage = %+v, want the first Full and marked Reset", kinds)
	}
	if got := r.resets(); got != 1 {
		t.Errorf("%d updates marked Reset, want 1 (the first after the outage)", got)
	}
	if got := r.logs.count(msgReset); got != 1 {
		t.Errorf("logged %q %d times, want once", msgReset, got)
	}
}

// TestNodeIDChanged: the agent answers throughout, but another agent now
// (a new node ID: restarted on an empty data directory quicker than any
// request failed, or another agent behind the address). The probe reads
// the node ID now and then, and the next update is marked Reset; the same
// node ID again says nothing.
func TestNodeIDChanged(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() { f.entries, f.nodeID = svcEntries(1), "node-a" })
	r := startSource(t, nil, map[string]any{"address": addr, "read_timeout": "200ms"})
	r.synced(patience)
	n := r.updateCount()
	f.set(func() { f.nodeID = "node-b" })
	r.waitFor(patience, "an update marked Reset", func() bool { return r.resets() == 1 })
	if kinds := r.kindsSince(n); kinds[0] != (updateKind{full: true, reset: true}) {
		t.Errorf("updates after the agent changed = %+v, want the first Full and marked Reset", kinds)
	}
	reads := f.count("/v1/agent/self")
	waitFor(t, patience, "two more reads of the node ID", func() bool { return f.count("/v1/agent/self") >= reads+2 })
	if got := r.resets(); got != 1 {
		t.Errorf("%d updates marked Reset, want 1: the node ID did not change again", got)
	}
}
