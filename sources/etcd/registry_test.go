package etcd

import (
	"context"
	"fmt"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsbridge/xdsbridge/test/etcdtest"
)

// fixture is one format as its real registrar writes it: where, and how
// an instance is added, changed and removed.
type fixture struct {
	format string
	prefix string
	// cluster is the service name the source serves for svc.
	cluster func(svc string) string
	// put registers (or re-registers with new data) instance id of svc.
	put func(ctx context.Context, r etcdtest.Registrar, svc, id string, in inst, opts ...clientv3.OpOption) error
	// del deregisters instance id of svc.
	del func(ctx context.Context, r etcdtest.Registrar, svc, id string, in inst) error
	// key is the key of instance id of svc (where a broken registrar
	// writes garbage).
	key func(svc, id string, in inst) string
}

var fixtures = []fixture{
	{
		format:  FormatGRPCNaming,
		prefix:  "services/",
		cluster: func(svc string) string { return svc },
		put: func(ctx context.Context, r etcdtest.Registrar, svc, _ string, in inst, opts ...clientv3.OpOption) error {
			var md any
			if in.meta != "" {
				md = map[string]any{"version": in.meta}
			}
			return r.GRPC(ctx, "services/"+svc, addr(in), md, opts...)
		},
		del: func(ctx context.Context, r etcdtest.Registrar, svc, _ string, in inst) error {
			return r.GRPCDelete(ctx, "services/"+svc, addr(in))
		},
		key: func(svc, _ string, in inst) string { return "services/" + svc + "/" + addr(in) },
	},
	{
		format:  FormatSkyDNS,
		prefix:  "/skydns/local/example/",
		cluster: func(svc string) string { return svc + ".example.local" },
		put: func(ctx context.Context, r etcdtest.Registrar, svc, id string, in inst, opts ...clientv3.OpOption) error {
			return r.SkyDNS(ctx, "/skydns", id+"."+svc+".example.local",
				etcdtest.SkyRecord{Host: in.addr, Port: int(in.port), Weight: int(in.weight), Priority: int(in.priority), TTL: 30}, opts...)
		},
		del: func(ctx context.Context, r etcdtest.Registrar, svc, id string, _ inst) error {
			return r.Delete(ctx, etcdtest.SkyKey("/skydns", id+"."+svc+".example.local"))
		},
		key: func(svc, id string, _ inst) string { return etcdtest.SkyKey("/skydns", id+"."+svc+".example.local") },
	},
	{
		format:  FormatJSON,
		prefix:  "instances/",
		cluster: func(svc string) string { return svc },
		put: func(ctx context.Context, r etcdtest.Registrar, svc, id string, in inst, opts ...clientv3.OpOption) error {
			m := map[string]any{"address": in.addr, "port": in.port, "weight": in.weight, "priority": in.priority}
			if in.meta != "" {
				m["metadata"] = map[string]string{"version": in.meta}
			}
			return r.JSON(ctx, "instances/"+svc+"/"+id, m, opts...)
		},
		del: func(ctx context.Context, r etcdtest.Registrar, svc, id string, _ inst) error {
			return r.Delete(ctx, "instances/"+svc+"/"+id)
		},
		key: func(svc, id string, _ inst) string { return "instances/" + svc + "/" + id },
	},
}

func addr(in inst) string { return fmt.Sprintf("%s:%d", in.addr, in.port) }

// expect is what the source serves for in under f's format: gRPC naming
// carries no weight or priority (the resolver has none), SkyDNS no
// metadata.
func (f fixture) expect(in inst) inst {
	switch f.format {
	case FormatGRPCNaming:
		in.weight, in.priority = 1, 0
	case FormatSkyDNS:
		in.meta = ""
		in.weight = max(in.weight, 1)
	}
	return in
}

// change is the data change a registrar of the format can make to a
// registered instance: new metadata for gRPC naming (the address is the
// instance), a new weight and priority for SkyDNS, both for json.
func (f fixture) change(in inst) inst {
	in.meta = "v2"
	in.weight, in.priority = 7, 1
	return in
}

// served is what a step leaves served: each cluster's instances, nil for a
// cluster removed.
type served map[string][]inst

// driveFormat is the registry life every format is tested with, written
// by the format's real registrar (f): the first state, an instance added,
// one removed, an instance's data changed, a whole service removed, and a
// malformed key written beside a good one. check is called after each
// step with what must then be served; before the first step's check, the
// source (or bridge) under test is started by start.
func driveFormat(t *testing.T, reg etcdtest.Registrar, f fixture, start func(), check func(step string, want served)) {
	t.Helper()
	ctx := t.Context()
	a1 := inst{addr: "10.0.0.1", port: 8080, weight: 3, meta: "v1"}
	a2 := inst{addr: "10.0.0.2", port: 8080, weight: 3, meta: "v1"}
	a3 := inst{addr: "10.0.0.3", port: 8081, weight: 5, meta: "v1"}
	b1 := inst{addr: "10.0.1.1", port: 9090, weight: 1, meta: "v1"}
	web, api := f.cluster("web"), f.cluster("api")
	e := f.expect
	must(t, f.put(ctx, reg, "web", "i1", a1))
	must(t, f.put(ctx, reg, "web", "i2", a2))
	must(t, f.put(ctx, reg, "api", "i1", b1))
	start()
	check("first state", served{web: {e(a1), e(a2)}, api: {e(b1)}})

	must(t, f.put(ctx, reg, "web", "i3", a3))
	check("an instance added", served{web: {e(a1), e(a2), e(a3)}})

	must(t, f.del(ctx, reg, "web", "i2", a2))
	check("an instance removed", served{web: {e(a1), e(a3)}})

	a1c := f.change(a1)
	must(t, f.put(ctx, reg, "web", "i1", a1c))
	check("an instance's data changed", served{web: {e(a1c), e(a3)}})

	must(t, f.del(ctx, reg, "api", "i1", b1))
	check("a whole service removed", served{api: nil})

	must(t, reg.Raw(ctx, f.key("web", "i9", inst{addr: "10.0.0.9", port: 8080}), `{"garbage`))
	must(t, f.put(ctx, reg, "web", "i4", a2))
	check("a malformed key beside a good one", served{web: {e(a1c), e(a2), e(a3)}})
}

// TestFormats runs each format against a real etcd, written by the real
// registrar of the format (see driveFormat); the malformed key is dropped
// and counted, and the rest served. The formats share one etcd: each
// writes under a prefix of its own, the only one its source reads.
func TestFormats(t *testing.T) {
	srv := etcdtest.Start(t)
	reg := etcdtest.Registrar{C: srv.Client(t)}
	for _, f := range fixtures {
		t.Run(f.format, func(t *testing.T) {
			var r *running
			start := func() {
				r = startSource(t, srv, map[string]any{"services": []any{map[string]any{"prefix": f.prefix, "format": f.format}}})
			}
			driveFormat(t, reg, f, start, func(_ string, want served) {
				for name, insts := range want {
					if insts == nil {
						r.waitGone(name)
					} else {
						r.waitService(name, insts...)
					}
				}
			})
			st := r.status.Snapshot()
			if st.Dropped != 1 {
				t.Errorf("dropped_endpoints = %d after one malformed key, want 1", st.Dropped)
			}
			if note := st.Notes[noteDropped]; note == "" {
				t.Errorf("no %s note naming the malformed key; notes %v", noteDropped, st.Notes)
			}
			if st.Stale || !st.Synced {
				t.Errorf("status %+v, want synced and not stale", st)
			}
			if web := f.cluster("web"); !slices.Equal(r.names(), []string{web}) {
				t.Errorf("services %v, want only %s", r.names(), web)
			}
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
