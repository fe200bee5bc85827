package etcd

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsbridge/xdsbridge/internal/etcdtest"
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

// TestFormats runs each format against a real etcd, written by the real
// registrar of the format: the first state, an instance added, one
// removed, an instance's data changed, a whole service removed, and
// malformed data dropped and counted while the rest is served.
func TestFormats(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.format, func(t *testing.T) {
			srv := etcdtest.Start(t)
			ctx := t.Context()
			reg := etcdtest.Registrar{C: srv.Client(t)}
			a1 := inst{addr: "10.0.0.1", port: 8080, weight: 3, meta: "v1"}
			a2 := inst{addr: "10.0.0.2", port: 8080, weight: 3, meta: "v1"}
			a3 := inst{addr: "10.0.0.3", port: 8081, weight: 5, meta: "v1"}
			b1 := inst{addr: "10.0.1.1", port: 9090, weight: 1, meta: "v1"}
			must(t, f.put(ctx, reg, "web", "i1", a1))
			must(t, f.put(ctx, reg, "web", "i2", a2))
			must(t, f.put(ctx, reg, "api", "i1", b1))

			r := startSource(t, srv, map[string]any{"services": []any{map[string]any{"prefix": f.prefix, "format": f.format}}})
			web, api := f.cluster("web"), f.cluster("api")
			r.waitService(web, f.expect(a1), f.expect(a2))
			r.waitService(api, f.expect(b1))

			must(t, f.put(ctx, reg, "web", "i3", a3))
			r.waitService(web, f.expect(a1), f.expect(a2), f.expect(a3))

			must(t, f.del(ctx, reg, "web", "i2", a2))
			r.waitService(web, f.expect(a1), f.expect(a3))

			a1c := f.change(a1)
			must(t, f.put(ctx, reg, "web", "i1", a1c))
			r.waitService(web, f.expect(a1c), f.expect(a3))

			must(t, f.del(ctx, reg, "api", "i1", b1))
			r.waitGone(api)

			bad := inst{addr: "10.0.0.9", port: 8080}
			must(t, reg.Raw(ctx, f.key("web", "i9", bad), `{"garbage`))
			must(t, f.put(ctx, reg, "web", "i4", a2))
			r.waitService(web, f.expect(a1c), f.expect(a2), f.expect(a3))
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
			if got := r.names(); len(got) != 1 || got[0] != web {
				t.Errorf("services %v, want only %s", got, web)
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
