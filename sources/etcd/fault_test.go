package etcd

import (
	"maps"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsbridge/xdsbridge/test/countproxy"
	"github.com/xdsbridge/xdsbridge/test/etcdtest"
)

// grpcSource is a source of the gRPC naming prefix services/ with fast
// retries.
var grpcSource = map[string]any{
	"services":  []any{map[string]any{"prefix": "services/", "format": FormatGRPCNaming}},
	"retry_min": "50ms",
	"retry_max": "500ms",
}

// rangeReads returns the reads (Range requests) etcd served, and the
// watch streams it opened.
func rangeReads(t *testing.T, srv *etcdtest.Server) (reads, streams float64) {
	t.Helper()
	m, err := srv.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	reads, _ = etcdtest.Count(m, "grpc_server_handled_total", `grpc_method="Range"`)
	streams, _ = etcdtest.Count(m, "grpc_server_started_total", `grpc_method="Watch"`)
	return reads, streams
}

// TestLeaseExpiryRemovesInstances registers instances under a lease that
// is not kept alive: when etcd expires it, its keys are deleted and the
// instances leave; a service whose last instance expired is removed.
func TestLeaseExpiryRemovesInstances(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := t.Context()
	c := srv.Client(t)
	reg := etcdtest.Registrar{C: c}
	lease, err := c.Grant(ctx, 2)
	must(t, err)
	a1 := inst{addr: "10.0.0.1", port: 8080, weight: 1}
	a2 := inst{addr: "10.0.0.2", port: 8080, weight: 1}
	b1 := inst{addr: "10.0.1.1", port: 8080, weight: 1}
	must(t, reg.GRPC(ctx, "services/web", addr(a1), nil, clientv3.WithLease(lease.ID)))
	must(t, reg.GRPC(ctx, "services/web", addr(a2), nil))
	must(t, reg.GRPC(ctx, "services/api", addr(b1), nil, clientv3.WithLease(lease.ID)))

	r := startSource(t, srv, grpcSource)
	// The lease may expire before the first read on a slow machine: the
	// end state is what counts.
	r.waitService("web", a2)
	r.waitGone("api")
	if st := r.status.Snapshot(); st.FailuresTotal != 0 || st.Dropped != 0 {
		t.Errorf("status %+v: an expiry is neither a failure nor a dropped key", st)
	}
}

// TestRestartResumesFromRevision kills etcd and starts it again on the
// same data: the source keeps serving its last state while etcd is down
// (stale, logged once), then resumes its watch from the last revision it
// saw: etcd serves it a watch stream and no read, and the source sends no
// second Full update.
func TestRestartResumesFromRevision(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := t.Context()
	reg := etcdtest.Registrar{C: srv.Client(t)}
	a1 := inst{addr: "10.0.0.1", port: 8080, weight: 1}
	a2 := inst{addr: "10.0.0.2", port: 8080, weight: 1}
	must(t, reg.GRPC(ctx, "services/web", addr(a1), nil))
	r := startSource(t, srv, grpcSource)
	r.waitService("web", a1)

	srv.Kill()
	r.waitFor("the source to be stale", func() bool { return r.status.Snapshot().Stale })
	r.waitService("web", a1)
	must(t, srv.Restart())
	r.waitFor("the source to recover", func() bool { return !r.status.Snapshot().Stale })
	must(t, reg.GRPC(ctx, "services/web", addr(a2), nil))
	r.waitService("web", a1, a2)

	// A watch stream or two: the source may reach the restarted member
	// before it has a leader, which refuses a watch that requires one.
	reads, streams := rangeReads(t, srv)
	if reads != 0 || streams < 1 {
		t.Errorf("after the restart etcd served %v reads and %v watch streams, want no read (a resumed watch)", reads, streams)
	}
	if full, reset := r.fullUpdates(); full != 1 || reset != 0 {
		t.Errorf("%d Full updates (%d Reset), want the first alone", full, reset)
	}
	if n, m := r.logLines(msgFailing), r.logLines(msgRecovered); n != 1 || m != 1 {
		t.Errorf("%d failure lines and %d recovery lines, want 1 each", n, m)
	}
}

// TestWipedEtcdIsReadAgain replaces etcd by an empty one on the same
// address (its revision starts over): the source reads the prefixes again
// once, and says that the registry lost its state, so that the removal
// guard holds the removals until registrars have refilled it.
func TestWipedEtcdIsReadAgain(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := t.Context()
	reg := etcdtest.Registrar{C: srv.Client(t)}
	a1 := inst{addr: "10.0.0.1", port: 8080, weight: 1}
	a2 := inst{addr: "10.0.0.2", port: 8080, weight: 1}
	for i := range 5 {
		must(t, reg.GRPC(ctx, "services/web", addr(a1), map[string]any{"round": i}))
	}
	must(t, reg.GRPC(ctx, "services/api", addr(a2), nil))
	r := startSource(t, srv, grpcSource)
	r.waitService("api", a2)

	must(t, srv.Wipe())
	must(t, reg.GRPC(ctx, "services/web", addr(a2), nil))
	r.waitService("web", a2)
	r.waitGone("api")
	if full, reset := r.fullUpdates(); full != 2 || reset != 1 {
		t.Errorf("%d Full updates (%d Reset), want 2: the first and one marked Reset", full, reset)
	}
	if n := r.logLines(msgWentBack); n != 1 {
		t.Errorf("%d lines saying etcd went back, want 1", n)
	}
}

// TestCompactionResyncsOnce cuts the source off etcd while instances
// change and etcd compacts past the revision the source saw: back, the
// source's resumed watch is refused (ErrCompacted) and it reads the
// prefix once, at the current revision, then follows it again.
func TestCompactionResyncsOnce(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := t.Context()
	reg := etcdtest.Registrar{C: srv.Client(t)}
	a1 := inst{addr: "10.0.0.1", port: 8080, weight: 1}
	a2 := inst{addr: "10.0.0.2", port: 8080, weight: 1}
	a3 := inst{addr: "10.0.0.3", port: 8080, weight: 1}
	must(t, reg.GRPC(ctx, "services/web", addr(a1), nil))
	r := startSource(t, srv, grpcSource)
	r.waitService("web", a1)

	must(t, srv.Isolate())
	r.waitFor("the source to be stale", func() bool { return r.status.Snapshot().Stale })
	must(t, reg.GRPC(ctx, "services/web", addr(a2), nil))
	must(t, reg.GRPCDelete(ctx, "services/web", addr(a1)))
	_, err := srv.Compact(ctx)
	must(t, err)
	must(t, srv.Restart())
	r.waitService("web", a2)
	must(t, reg.GRPC(ctx, "services/web", addr(a3), nil))
	r.waitService("web", a2, a3)

	if reads, _ := rangeReads(t, srv); reads != 1 {
		t.Errorf("etcd served %v reads after the compaction, want 1 (one page of one prefix)", reads)
	}
	if n := r.logLines(msgCompacted); n != 1 {
		t.Errorf("%d lines about the compaction, want 1", n)
	}
	if full, reset := r.fullUpdates(); full != 2 || reset != 0 {
		t.Errorf("%d Full updates (%d Reset), want 2: the first and the re-read's", full, reset)
	}
}

// TestOutageWorkBounded takes etcd away from the source (its port
// refuses connections) and counts, through a proxy in front of it, the
// connections the source opens meanwhile: no more than its backoff
// allows, one per attempt. The last good state stays served, the failure
// is logged once, and the recovery once.
func TestOutageWorkBounded(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := t.Context()
	reg := etcdtest.Registrar{C: srv.Client(t)}
	proxy, err := countproxy.TCP(strings.TrimPrefix(srv.ClientURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	a1 := inst{addr: "10.0.0.1", port: 8080, weight: 1}
	a2 := inst{addr: "10.0.0.2", port: 8080, weight: 1}
	must(t, reg.GRPC(ctx, "services/web", addr(a1), nil))
	cfg := maps.Clone(grpcSource)
	cfg["endpoints"] = []any{proxy.Addr}
	r := startSource(t, srv, cfg)
	r.waitService("web", a1)

	before, start := proxy.Counts().Conns, time.Now()
	must(t, srv.Isolate())
	r.waitFor("8 failed attempts", func() bool { return r.status.Snapshot().Failures >= 8 })
	conns, elapsed := proxy.Counts().Conns-before, time.Since(start)
	t.Logf("%d connections in %s of outage", conns, elapsed.Round(time.Millisecond))
	if limit := maxAttempts(elapsed, 50*time.Millisecond, 500*time.Millisecond); conns > int64(limit) {
		t.Errorf("%d connections in %s of outage, want at most %d (the backoff's pace)", conns, elapsed, limit)
	}
	if s, _ := r.service("web"); len(s.Endpoints) != 1 || !r.status.Snapshot().Stale {
		t.Errorf("during the outage: web %+v, stale %v; want the last good state, stale", s, r.status.Snapshot().Stale)
	}

	must(t, srv.Restart())
	must(t, reg.GRPC(ctx, "services/web", addr(a2), nil))
	r.waitService("web", a1, a2)
	if n, m := r.logLines(msgFailing), r.logLines(msgRecovered); n != 1 || m != 1 {
		t.Errorf("%d failure lines and %d recovery lines, want 1 each", n, m)
	}
}
