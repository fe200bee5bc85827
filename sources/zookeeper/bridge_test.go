package zookeeper_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/xdsbridge/xdsbridge/bridge"
	_ "github.com/xdsbridge/xdsbridge/plugins"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/test/zktest"
)

// TestMain lets this test binary be the grpc-go process TestFormats
// observes the bridge with.
func TestMain(m *testing.M) {
	grpcxdstest.ObserverMain()
	os.Exit(m.Run())
}

// ep is what the tests compare of one served endpoint.
type ep struct {
	addr   string
	port   uint32
	weight uint32
}

func eps(cla *endpointv3.ClusterLoadAssignment) []ep {
	var out []ep
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, ep{sa.GetAddress(), sa.GetPortValue(), e.GetLoadBalancingWeight().GetValue()})
		}
	}
	slices.SortFunc(out, func(a, b ep) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

// driver is one format's registrar as the steps of TestFormats use it.
type driver struct {
	format string
	// entries are the source's services entries (YAML flow sequences
	// items) serving clusters a and b.
	entries func(root string) string
	a, b    string // cluster names
	// add registers instance i of cluster c (one of a, b); it returns the
	// znode and the endpoint the client must see.
	add func(r *zktest.Registrar, root, c string, i int) (string, ep)
	// change changes the data of instance i at znode; it returns the
	// znode now holding it (Dubbo's is renamed) and the endpoint.
	change func(r *zktest.Registrar, root, c, znode string, i int) (string, ep)
	// bad writes an instance of cluster c that does not parse.
	bad func(r *zktest.Registrar, root, c string)
	// service returns the znode whose deletion removes cluster c.
	service func(root, c string) string
}

func addr(i int) string { return fmt.Sprintf("10.1.0.%d", i+1) }

var drivers = []driver{
	{
		format:  "curator",
		entries: func(root string) string { return fmt.Sprintf("{path: %s, format: curator}", root) },
		a:       "web", b: "api",
		add: func(r *zktest.Registrar, root, c string, i int) (string, ep) {
			return r.Curator(root, c, fmt.Sprintf("id-%d", i), addr(i), 8000+i), ep{addr(i), uint32(8000 + i), 1}
		},
		change: func(r *zktest.Registrar, _, c, znode string, i int) (string, ep) {
			r.Set(znode, zktest.CuratorInstance(c, fmt.Sprintf("id-%d", i), addr(i), 9000+i))
			return znode, ep{addr(i), uint32(9000 + i), 1}
		},
		bad:     func(r *zktest.Registrar, root, c string) { r.Raw(root+"/"+c+"/broken", []byte(`{"name":`)) },
		service: func(root, c string) string { return root + "/" + c },
	},
	{
		format: "serverset",
		entries: func(root string) string {
			return fmt.Sprintf("{path: %s/web, format: serverset}, {path: %s/api, format: serverset}", root, root)
		},
		a: "web", b: "api",
		add: func(r *zktest.Registrar, root, c string, i int) (string, ep) {
			return r.Serverset(root+"/"+c, zktest.Endpoint{Host: addr(i), Port: 8000 + i},
				map[string]zktest.Endpoint{"admin": {Host: addr(i), Port: 9990}}, "ALIVE", i), ep{addr(i), uint32(8000 + i), 1}
		},
		change: func(r *zktest.Registrar, _, _, znode string, i int) (string, ep) {
			r.Set(znode, zktest.ServersetMember(zktest.Endpoint{Host: addr(i), Port: 9000 + i}, nil, "ALIVE", i))
			return znode, ep{addr(i), uint32(9000 + i), 1}
		},
		bad:     func(r *zktest.Registrar, root, c string) { r.Raw(root+"/"+c+"/member_9999999999", []byte(`not json`)) },
		service: func(root, c string) string { return root + "/" + c },
	},
	{
		format: "nerve",
		entries: func(root string) string {
			return fmt.Sprintf("{path: %s/web/services, format: nerve, cluster: web}, {path: %s/api/services, format: nerve, cluster: api}", root, root)
		},
		a: "web", b: "api",
		add: func(r *zktest.Registrar, root, c string, i int) (string, ep) {
			return r.Nerve(root+"/"+c+"/services", fmt.Sprintf("i-%d", i), c, addr(i), 8000+i, 10, map[string]string{"az": "a"}),
				ep{addr(i), uint32(8000 + i), 10}
		},
		change: func(r *zktest.Registrar, _, _, znode string, i int) (string, ep) {
			r.Set(znode, zktest.NerveInstance(addr(i), 8000+i, fmt.Sprintf("i-%d", i), 30, nil))
			return znode, ep{addr(i), uint32(8000 + i), 30}
		},
		bad: func(r *zktest.Registrar, root, c string) {
			r.Raw(root+"/"+c+"/services/bad_0000000001", []byte(`{"host":"10.9.9.9"}`))
		},
		service: func(root, c string) string { return root + "/" + c + "/services" },
	},
	{
		format:  "dubbo",
		entries: func(root string) string { return fmt.Sprintf("{path: %s, format: dubbo}", root) },
		a:       "org.example.Greeter", b: "org.example.Billing",
		add: func(r *zktest.Registrar, root, c string, i int) (string, ep) {
			return r.Dubbo(root, c, addr(i), 20880+i, dubboParams(c, 100)), ep{addr(i), uint32(20880 + i), 100}
		},
		change: func(r *zktest.Registrar, root, c, znode string, i int) (string, ep) {
			// A provider's URL is its znode's name: Dubbo re-registers.
			r.Delete(znode)
			return r.Dubbo(root, c, addr(i), 20880+i, dubboParams(c, 40)), ep{addr(i), uint32(20880 + i), 40}
		},
		bad: func(r *zktest.Registrar, root, c string) {
			r.Raw(root+"/"+c+"/providers/"+url.QueryEscape("dubbo://10.9.9.9:notaport/x"), nil)
		},
		service: func(root, c string) string { return root + "/" + c },
	},
}

func dubboParams(iface string, weight int) url.Values {
	return url.Values{"interface": {iface}, "side": {"provider"}, "group": {"g"}, "version": {"1.0.0"},
		"application": {"demo"}, "weight": {fmt.Sprint(weight)}, "anyhost": {"true"}}
}

// fixture is a bridge watching one ZooKeeper and an ADS client of it.
type fixture struct {
	in     *bridge.Instance
	client *envoysim.Client
	log    *bridgetest.LogBuffer
}

func startBridge(t *testing.T, zkAddr, entries, extra string) *fixture {
	t.Helper()
	var log bridgetest.LogBuffer
	in := bridgetest.StartIn(t, t.TempDir(), fmt.Sprintf(`xds: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
sources:
  - name: zk
    type: zookeeper
    servers: [%q]
    retry_min: 100ms
    retry_max: 2s
    services: [%s]
%s`, zkAddr, entries, extra), &log)
	client, err := envoysim.Start(t.Context(), envoysim.Options{Addr: in.XDSAddr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return &fixture{in: in, client: client, log: &log}
}

// wait waits until the client holds cluster c with exactly want (nil:
// the cluster is gone).
func (f *fixture) wait(t *testing.T, c string, want []ep) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), bridgetest.Patience)
	defer cancel()
	var last []ep
	err := f.client.WaitFor(ctx, func(st envoysim.State) bool {
		if want == nil {
			return st.Clusters[c] == nil
		}
		cla := st.Assignments[c]
		last = eps(cla)
		return st.Clusters[c] != nil && cla != nil && slices.Equal(last, want)
	})
	if err != nil {
		t.Fatalf("cluster %s: want %v, last seen %v: %v", c, want, last, err)
	}
}

// balancedAs reports whether grpc-go, by st, balances cluster c over
// exactly want (nil: holds the service as removed).
func balancedAs(st map[grpcxdstest.Key]grpcxdstest.ResourceStatus, c string, want []ep) bool {
	if want == nil {
		return grpcxdstest.Gone(st, c)
	}
	wanted := []grpcxdstest.Endpoint{}
	for _, e := range want {
		wanted = append(wanted, grpcxdstest.Endpoint{Address: e.addr, Port: e.port, Weight: e.weight})
	}
	slices.SortFunc(wanted, func(a, b grpcxdstest.Endpoint) int { return strings.Compare(a.String(), b.String()) })
	got, ok := grpcxdstest.Balanced(st, c)
	return ok && slices.Equal(got, wanted)
}

func sorted(m map[string]ep) []ep {
	out := []ep{}
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b ep) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

// TestFormats runs every format end to end against a real ZooKeeper: its
// registrar writes, the bridge watches, and two clients, an Envoy-like ADS
// client and grpc-go's xDS client (read through its CSDS), see the first
// state, an instance added, one removed, one changed (and /debug/why
// naming its znode), a malformed one dropped and counted in /sources and
// the metrics while the rest is served, and a whole service removed.
func TestFormats(t *testing.T) {
	srv := zktest.Start(t)
	for _, d := range drivers {
		t.Run(d.format, func(t *testing.T) {
			root := "/t-" + d.format
			r := zktest.NewRegistrar(t, srv.Addr, 10*time.Second)
			a, b := map[string]ep{}, map[string]ep{}
			for i := range 2 {
				z, e := d.add(r, root, d.a, i)
				a[z] = e
			}
			zb, eb := d.add(r, root, d.b, 5)
			b[zb] = eb
			f := startBridge(t, srv.Addr, d.entries(root), "")
			admin := "http://" + f.in.AdminAddr().String()
			g := grpcxdstest.StartObserver(t, f.in.XDSAddr().String(), "grpc-observer", d.a, d.b)
			// check is one step's expectation, held by both clients.
			check := func(c string, want []ep) {
				t.Helper()
				f.wait(t, c, want)
				g.WaitFor(fmt.Sprintf("grpc-go to hold cluster %s as %v", c, want), func(st map[grpcxdstest.Key]grpcxdstest.ResourceStatus) bool {
					return balancedAs(st, c, want)
				})
			}
			check(d.a, sorted(a))
			check(d.b, sorted(b))

			z, e := d.add(r, root, d.a, 2)
			a[z] = e
			check(d.a, sorted(a))

			var first, second string
			for z := range a {
				if a[z].addr == addr(0) {
					first = z
				}
				if a[z].addr == addr(1) {
					second = z
				}
			}
			r.Delete(first)
			delete(a, first)
			check(d.a, sorted(a))

			z, e = d.change(r, root, d.a, second, 1)
			delete(a, second)
			a[z] = e
			check(d.a, sorted(a))
			// Provenance: the znode and, where the data is the instance,
			// the version of it served (the change made it 1).
			origin := "znode " + z
			if d.format != "dubbo" {
				origin += " version 1"
			}
			if code, why := bridgetest.Get(admin + "/debug/why?cluster=" + url.QueryEscape(d.a)); code != http.StatusOK || !strings.Contains(why, origin) {
				t.Errorf("/debug/why?cluster=%s: %d %s; want %q", d.a, code, why, origin)
			}

			d.bad(r, root, d.a)
			bridgetest.Eventually(t, bridgetest.Patience, "the malformed znode dropped and counted", func() bool {
				st := bridgetest.SourceStatus(t, f.in.AdminAddr().String(), "zk")
				return st.Dropped >= 1 && strings.Contains(st.Notes["dropped_znodes"], "1 znodes not served")
			})
			if n := bridgetest.ScrapeMetrics(t, admin+"/metrics", "").Values[`xdsbridge_source_dropped_endpoints_total{source="zk"}`]; n < 1 {
				t.Errorf("xdsbridge_source_dropped_endpoints_total of source zk is %v after a malformed znode", n)
			}
			check(d.a, sorted(a)) // the rest still served

			r.Delete(d.service(root, d.b))
			check(d.b, nil)
			check(d.a, sorted(a))
			if st := bridgetest.SourceStatus(t, f.in.AdminAddr().String(), "zk"); st.Stale || !st.Synced {
				t.Fatalf("source status %+v", st)
			}
		})
	}
}
