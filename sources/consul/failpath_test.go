package consul

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// TestOneReadThrottled: a 429 on the reads of one service retries those
// reads alone, with their own backoff, while the other service's changes
// still flow; no other service is read again because of it.
func TestOneReadThrottled(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() {
		f.entries = svcEntries(1)
		f.catalog = map[string][]string{"svc": {}, "other": {}}
		f.catIndex = 5 // the catalog does not move: no sweep
	})
	// The read path: a watch of svc would see the change instead.
	r := startSource(t, nil, map[string]any{"address": addr, "retry_min": "100ms", "retry_max": "400ms", "watch": false})
	r.synced(patience)
	const svcPath, otherPath = "/v1/health/service/svc", "/v1/health/service/other"
	f.set(func() { f.throttled[svcPath] = true })
	// A check change names svc only: its read fails, nothing else is read.
	otherBefore := f.count(otherPath)
	f.set(func() {
		f.index++
		f.entries = svcEntries(1, 2)
		f.checks = []*api.HealthCheck{{Node: "n1", CheckID: "c1", ServiceName: "svc", Status: "critical", ModifyIndex: f.index}}
	})
	r.waitFor(patience, "stale", func() bool { return r.status.Snapshot().Stale })
	start, svcBefore := time.Now(), f.count(svcPath)
	waitFor(t, patience, "1.2s of retries", func() bool { return time.Since(start) >= 1200*time.Millisecond })
	retries := f.count(svcPath) - svcBefore
	// Backoff 100ms doubling to 400ms with jitter: 2 to 7 retries in 1.2s.
	if retries < 2 || retries > 8 {
		t.Errorf("%d retries of the throttled read in 1.2s, want 2..8 (its own backoff)", retries)
	}
	if got := f.count(otherPath) - otherBefore; got != 0 {
		t.Errorf("the other service was read %d times because one read failed", got)
	}
	if !strings.Contains(r.status.Snapshot().LastError, "429") {
		t.Errorf("last error %q does not say 429", r.status.Snapshot().LastError)
	}
	f.set(func() { delete(f.throttled, svcPath) })
	r.waitFor(patience, "svc read once the throttling ends", func() bool {
		return len(r.endpointsOf("svc")) == 2 && !r.status.Snapshot().Stale
	})
	if got := r.logs.count(msgRecovered); got != 1 {
		t.Errorf("logged %q %d times, want once", msgRecovered, got)
	}
}

// TestIndexBackwardsReset: an index that goes backwards without any error
// (a snapshot restore) is a reset: the next update is the whole restored
// state, marked Reset, removals included (the removal guard holds them).
func TestIndexBackwardsReset(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() {
		f.index = 100
		f.entries = svcEntries(1, 2)
		f.catalog = map[string][]string{"svc": {}, "other": {}}
	})
	r := startSource(t, nil, map[string]any{"address": addr, "on_empty": "remove"})
	r.synced(patience)
	r.waitFor(patience, "svc with 2 endpoints", func() bool { return len(r.endpointsOf("svc")) == 2 })
	n := r.updateCount()
	f.set(func() {
		f.index = 40
		f.entries = svcEntries(2, 3)
		f.catalog = map[string][]string{"svc": {}}
	})
	r.waitFor(patience, "the restored state", func() bool {
		_, ok := r.service("other")
		_, has1 := r.endpointsOf("svc")[1]
		return !ok && !has1 && r.endpointsOf("svc")[3].Port == 3
	})
	kinds := r.kindsSince(n)
	if len(kinds) == 0 || kinds[0] != (updateKind{full: true, reset: true}) {
		t.Fatalf("updates after the restore = %+v, want the first Full and marked Reset", kinds)
	}
	if got := r.resets(); got != 1 {
		t.Errorf("%d updates marked Reset, want 1", got)
	}
}

// TestHungAgent: an agent that accepts connections and never answers.
// The source turns stale and says the requests timed out; a change made
// during the hang is served once the agent answers again (the log gives
// how long each took).
func TestHungAgent(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() { f.entries = svcEntries(1) })
	const deadline = 400 * time.Millisecond
	r := startSource(t, nil, map[string]any{"address": addr, "read_timeout": deadline.String(), "retry_max": "30s"})
	r.synced(patience)
	f.set(func() { f.hung["*"] = true })
	hung := time.Now()
	r.waitFor(patience, "stale", func() bool { return r.status.Snapshot().Stale })
	t.Logf("stale %v after the agent hung", time.Since(hung).Round(time.Millisecond))
	if e := r.status.Snapshot().LastError; !strings.Contains(e, "within") {
		t.Errorf("last error %q does not say the request timed out", e)
	}
	// While hung, a change is made; once the agent answers it is served.
	waitFor(t, patience, "several timed out probes", func() bool { return r.status.Snapshot().Failures >= 3 })
	f.set(func() { f.index++; f.entries = svcEntries(1, 2) })
	f.unhang()
	back := time.Now()
	r.waitFor(patience, "fresh again", func() bool { return !r.status.Snapshot().Stale })
	r.waitFor(patience, "the change made during the hang", func() bool { return len(r.endpointsOf("svc")) == 2 })
	t.Logf("fresh and changed %v after the agent answered", time.Since(back).Round(time.Millisecond))
	if got := r.logs.count(msgFailing); got != 1 {
		t.Errorf("logged %q %d times, want once", msgFailing, got)
	}
}

// TestOneReadHung: a service read that hangs times out after read_timeout
// and counts as a failure; the read is retried, the source is stale, the
// other reads go on.
func TestOneReadHung(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() { f.entries = svcEntries(1) })
	const deadline = 300 * time.Millisecond
	// The read path; a watch is a blocking query, whose deadline is its
	// wait plus read_timeout.
	r := startSource(t, nil, map[string]any{"address": addr, "read_timeout": deadline.String(), "watch": false})
	r.synced(patience)
	f.set(func() {
		f.hung["/v1/health/service/svc"] = true
		f.index++
		f.entries = svcEntries(1, 2)
	})
	hung := time.Now()
	r.waitFor(patience, "stale", func() bool { return r.status.Snapshot().Stale })
	if e := r.status.Snapshot().LastError; !strings.Contains(e, `service "svc"`) || !strings.Contains(e, "no answer within") {
		t.Errorf("last error %q does not name the read and the timeout", e)
	}
	t.Logf("stale %v after the read hung", time.Since(hung).Round(time.Millisecond))
	f.unhang()
	r.waitFor(patience, "the retried read served", func() bool {
		return len(r.endpointsOf("svc")) == 2 && !r.status.Snapshot().Stale
	})
}

// TestHungStartup: a /v1/agent/self that never answers is a logged
// failure, retried; the source syncs once the agent answers.
func TestHungStartup(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() {
		f.entries = svcEntries(1)
		f.hung["/v1/agent/self"] = true
	})
	r := startSource(t, nil, map[string]any{"address": addr, "read_timeout": "200ms"})
	r.waitFor(patience, "the hang logged", func() bool { return r.logs.count(msgFailing) == 1 })
	if e := r.status.Snapshot().LastError; !strings.Contains(e, "no answer within") {
		t.Errorf("last error %q does not say the request timed out", e)
	}
	f.unhang()
	back := time.Now()
	r.synced(patience)
	t.Logf("synced %v after the agent answered", time.Since(back).Round(time.Millisecond))
}

// TestTokenRotation: the token is revoked (every request gets 403) and a
// new one written to token_file; the source is stale meanwhile, removes
// nothing, and recovers with the new file, without a restart.
func TestTokenRotation(t *testing.T) {
	f, addr := newFakeConsul(t)
	path := filepath.Join(t.TempDir(), "token")
	writeToken := func(v string) {
		// Written aside and renamed, as Vault Agent and consul-template do.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	writeToken("old")
	f.set(func() { f.entries, f.token = svcEntries(1, 2), "old" })
	r := startSource(t, nil, map[string]any{"address": addr, "token_file": path, "retry_max": "30s"})
	r.synced(patience)
	n := r.updateCount()
	f.set(func() { f.token, f.index = "new", f.index+1 })
	r.waitFor(patience, "stale after the revocation", func() bool { return r.status.Snapshot().Stale })
	if e := r.status.Snapshot().LastError; !strings.Contains(e, "403") {
		t.Errorf("last error %q does not say 403", e)
	}
	// Let the retries back off a while.
	waitFor(t, patience, "failures", func() bool { return r.status.Snapshot().Failures >= 5 })
	writeToken("new")
	rotated := time.Now()
	r.waitFor(patience, "recovered with the new token", func() bool { return !r.status.Snapshot().Stale })
	t.Logf("recovered %v after the new token_file", time.Since(rotated).Round(time.Millisecond))
	if got := r.updateCount(); got != n {
		t.Errorf("%d updates published while the token was revoked", got-n)
	}
	if got := len(r.endpointsOf("svc")); got != 2 {
		t.Errorf("svc has %d endpoints after the rotation, want 2", got)
	}
}

// TestChangeReadsFirst: a read queued by a check change is dispatched
// before the reads of a running sweep, and queued once however often it
// is asked for.
func TestChangeReadsFirst(t *testing.T) {
	cfg := &Config{MaxConcurrentFetches: 8, MaxConnections: 12, RetryMin: time.Second, RetryMax: time.Second}
	cat := newCatalog(cfg, []string{"dc1"})
	l := newReadQueue(cat, &agentClient{cfg: cfg}, nil, nil, 8, nil, nil)
	for i := range 100 {
		st := &svcState{key: svcKey{0, svcName(i)}}
		cat[0].services[st.key.name] = st
		l.markSwept(st)
	}
	hot := cat[0].services[svcName(57)]
	l.markChanged(hot, 1)
	l.markChanged(hot, 2)
	l.markDirty(hot)
	if st := l.next(true); st != hot {
		t.Fatalf("first read %+v, want the changed service %v", st, hot.key)
	}
	hot.read.dirty = prioNone
	seen := map[svcKey]int{hot.key: 1}
	for {
		st := l.next(true)
		if st == nil {
			break
		}
		st.read.dirty = prioNone
		seen[st.key]++
	}
	if len(seen) != 100 {
		t.Errorf("%d services read, want 100", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%v read %d times", k, n)
		}
	}
}

// TestAnswerHeaders: answers without a known leader make the source stale
// until a leader is known again; answers with results hidden by ACLs
// remove nothing and show in the status; an answer from a server that
// lost the leader longer than max_stale ago is read again from the leader.
func TestAnswerHeaders(t *testing.T) {
	f, addr := newFakeConsul(t)
	f.set(func() {
		f.entries = svcEntries(1, 2)
		f.catalog = map[string][]string{"svc": {}, "other": {}}
	})
	r := startSource(t, nil, map[string]any{"address": addr, "max_stale": "2s", "on_empty": "remove"})
	r.synced(patience)

	f.set(func() { f.index++; f.headers = map[string]string{"X-Consul-KnownLeader": "false"} })
	r.waitFor(patience, "stale without a leader", func() bool { return r.status.Snapshot().Stale })
	f.set(func() { f.index++; f.headers = nil })
	r.waitFor(patience, "fresh with a leader", func() bool { return !r.status.Snapshot().Stale })

	f.set(func() {
		f.index++
		f.entries = svcEntries(2)
		f.catalog = map[string][]string{"svc": {}}
		f.headers = map[string]string{"X-Consul-Results-Filtered-By-ACLs": "true"}
	})
	r.waitFor(patience, "the ACL filtering noted", func() bool { return r.status.Snapshot().Notes["acl_filtered"] != "" })
	quiet(t, 300*time.Millisecond, func() bool {
		_, ok := r.service("other")
		return !ok || len(r.endpointsOf("svc")) != 2
	})
	f.set(func() { f.index++; f.headers = nil })
	r.waitFor(patience, "removed once no longer filtered", func() bool {
		_, ok := r.service("other")
		return !ok && len(r.endpointsOf("svc")) == 1 && r.status.Snapshot().Notes["acl_filtered"] == ""
	})

	// Stale answers 5s behind the leader: every read is repeated
	// consistently (no stale parameter).
	f.set(func() {
		f.index++
		f.entries = svcEntries(3)
		f.headers = map[string]string{"X-Consul-LastContact": "5000"}
	})
	r.waitFor(patience, "svc changed", func() bool { return len(r.endpointsOf("svc")) == 1 && r.endpointsOf("svc")[3].Port == 3 })
	f.mu.Lock()
	defer f.mu.Unlock()
	consistent := 0
	for _, req := range f.seen {
		if req.URL.Path == "/v1/health/service/svc" && !req.URL.Query().Has("stale") {
			consistent++
		}
	}
	if consistent == 0 {
		t.Error("no consistent read after an answer 5s behind the leader")
	}
}
