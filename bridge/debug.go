package bridge

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsbridge/xdsbridge/admin"
	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/xds"
)

// why keeps the services as last served (after transforms), for
// /debug/why, and as the publisher's record of the services whose
// resources are applied. The publisher writes it, admin requests read it:
// mu guards services, shaping and scopes.
type why struct {
	mu       sync.RWMutex
	services map[string]sources.Service
	peak     int // the most services held (reclaim.Map)
	shaping  *translate.Shaping
	scopes   *translate.Scopes
	// routes is the latest route configurations built, with their claims
	// and conflicts (see routeConfigs).
	routes atomic.Pointer[routeWhy]
}

// get returns the service name as served.
func (w *why) get(name string) (sources.Service, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	svc, ok := w.services[name]
	return svc, ok
}

// count is the number of services served.
func (w *why) count() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.services)
}

func (w *why) setScopes(s *translate.Scopes) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scopes = s
}

// all returns the services served, sorted by name.
func (w *why) all() []sources.Service {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]sources.Service, 0, len(w.services))
	for _, svc := range w.services {
		out = append(out, svc)
	}
	slices.SortFunc(out, func(a, b sources.Service) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (w *why) set(svc sources.Service) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.services[svc.Name] = svc
	w.peak = max(w.peak, len(w.services))
}

func (w *why) remove(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.services, name)
	w.services = reclaim.Map(w.services, &w.peak)
}

// Why is the answer of /debug/why: where a cluster's endpoints came from
// and what changed them.
type Why struct {
	Cluster string `json:"cluster"`
	// Source is the source whose version of the service is served.
	Source string `json:"source"`
	// Shaping lists the indexes (in `clusters`) of the shaping rules that
	// shaped the cluster, per client class.
	Shaping struct {
		Envoy []int `json:"envoy"`
		GRPC  []int `json:"grpc"`
	} `json:"shaping"`
	Endpoints []WhyEndpoint `json:"endpoints"`
	// Scope is what the scoping rules do with the cluster for the node
	// asked about (node=ID, with node_cluster=C), nil when none was.
	Scope *WhyScope `json:"scope,omitempty"`
}

// WhyScope says whether a node receives a cluster and which rule decided.
type WhyScope struct {
	Node string `json:"node"`
	// Connected: a stream of the node is connected, and its own id,
	// cluster, metadata and locality were matched; otherwise the id and
	// the cluster of the query alone.
	Connected bool `json:"connected"`
	// Scope is the node's scope, empty when it is unscoped; Rule the
	// configuration key that chose it (scopes.rules[i] or
	// scopes.default).
	Scope string `json:"scope"`
	Rule  string `json:"rule"`
	// Verdict: delivered (on a wildcard), named only (served when the
	// node asks for it by name) or denied (never); Selector the key of
	// the selector that decided, if one did.
	Verdict  translate.Verdict `json:"verdict"`
	Selector string            `json:"selector,omitempty"`
}

// WhyEndpoint is one endpoint with its provenance.
type WhyEndpoint struct {
	Address    string            `json:"address"`
	Port       uint32            `json:"port"`
	Weight     uint32            `json:"weight,omitempty"`
	Priority   uint32            `json:"priority,omitempty"`
	Health     string            `json:"health"`
	Locality   WhyLocality       `json:"locality"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Source     string            `json:"source"`
	Record     string            `json:"record,omitempty"`
	Transforms []string          `json:"transforms,omitempty"`
}

// WhyLocality is an endpoint's locality in the admin API's JSON.
type WhyLocality struct {
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	SubZone string `json:"sub_zone,omitempty"`
}

// explain returns the provenance of cluster name, and what the scopes do
// with it for node (nil: no node asked about); false if it is not served.
func (w *why) explain(name string, node *corev3.Node, connected bool) (Why, bool) {
	w.mu.RLock()
	svc, ok := w.services[name]
	scopes := w.scopes
	w.mu.RUnlock()
	if !ok {
		return Why{}, false
	}
	out := Why{Cluster: name, Source: svc.Source, Endpoints: []WhyEndpoint{}}
	c := translate.Cluster(name, 0)
	_, out.Shaping.Envoy = w.shaping.Shape(c, svc, false)
	_, out.Shaping.GRPC = w.shaping.Shape(c, svc, true)
	for _, e := range svc.Endpoints {
		out.Endpoints = append(out.Endpoints, WhyEndpoint{
			Address: e.Address, Port: e.Port, Weight: e.Weight, Priority: e.Priority,
			Health: e.Health.String(), Locality: WhyLocality(e.Locality), Metadata: e.Metadata,
			Source: e.Origin.Source, Record: e.Origin.Record, Transforms: e.Origin.Transforms,
		})
	}
	if node != nil {
		out.Scope = explainScope(scopes, svc, node, connected)
	}
	return out, true
}

// explainScope is what scopes do with svc for node.
func explainScope(scopes *translate.Scopes, svc sources.Service, node *corev3.Node, connected bool) *WhyScope {
	ws := &WhyScope{Node: node.GetId(), Connected: connected, Verdict: translate.Delivered}
	sc, i := scopes.Match(node)
	if sc == nil {
		ws.Rule = "none: the node is unscoped and gets every service"
		if scopes != nil {
			ws.Rule = "scopes.default (all)"
		}
		return ws
	}
	key := fmt.Sprintf("scopes.rules[%d]", i)
	if i < 0 {
		key = "scopes.default"
	}
	ws.Scope, ws.Rule = sc.Name, key
	ex := sc.Explain(svc)
	ws.Verdict = ex.Verdict
	switch {
	case ex.Selector < 0:
	case ex.Verdict == translate.Denied:
		ws.Selector = fmt.Sprintf("%s.deny[%d]", key, ex.Selector)
	default:
		ws.Selector = fmt.Sprintf("%s.services[%d]", key, ex.Selector)
	}
	return ws
}

// debugHandlers are the admin endpoints of this package:
//
//	/debug/why?cluster=C          provenance of cluster C's endpoints
//	/debug/why?cluster=C&node=N   and whether node N gets C (its scope's rule)
//	/debug/why?route=HOST/PATH    the route each route configuration takes for
//	                              a request, the claim behind it and those it beat
//	/debug/config_dump?node=N     what the connected node N holds
//	/debug/config_dump[?grpc=1]   everything served, as an Envoy (or gRPC) client gets it
//	/debug/config_dump?resource=F the entries of field F alone, as Envoy's ?resource=
//
// Both answer JSON; config_dump answers an envoy.admin.v3.ConfigDump in
// Envoy's JSON form (see ConfigDump), so that it reads and diffs like an
// Envoy's own /config_dump.
func debugHandlers(w *why, server *xds.Server) map[string]http.Handler {
	return map[string]http.Handler{
		"GET /debug/why": http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if route := r.URL.Query().Get("route"); route != "" {
				host, path, _ := strings.Cut(route, "/")
				admin.WriteJSON(rw, w.routes.Load().explain(host, "/"+path))
				return
			}
			name := r.URL.Query().Get("cluster")
			if name == "" {
				http.Error(rw, "a cluster or route parameter is required: /debug/why?cluster=NAME or /debug/why?route=HOST/PATH", http.StatusBadRequest)
				return
			}
			var node *corev3.Node
			connected := false
			if id := r.URL.Query().Get("node"); id != "" {
				node, connected = server.Node(id)
				if !connected {
					node = &corev3.Node{Id: id, Cluster: r.URL.Query().Get("node_cluster")}
				}
			}
			ans, ok := w.explain(name, node, connected)
			if !ok {
				http.Error(rw, "no cluster "+name+" is served", http.StatusNotFound)
				return
			}
			admin.WriteJSON(rw, ans)
		}),
		"GET /debug/config_dump": http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			var d xds.Dump
			var opts DumpOptions
			if node := q.Get("node"); node != "" {
				var ok bool
				if d, ok = server.Sent(node); !ok {
					http.Error(rw, "no xDS stream of node "+node+" is connected", http.StatusNotFound)
					return
				}
				opts = heldBy(server.Clients(), node)
			} else {
				d = server.Current(q.Get("grpc") == "1" || q.Get("grpc") == "true")
			}
			cd, err := ConfigDump(d, opts)
			if res := q.Get("resource"); res != "" && err == nil {
				if cd, err = Resource(cd, res); err != nil {
					http.Error(rw, err.Error(), http.StatusBadRequest)
					return
				}
			}
			if err == nil {
				var out []byte
				if out, err = Render(cd, false); err == nil {
					rw.Header().Set("Content-Type", "application/json")
					_, _ = rw.Write(out)
					return
				}
			}
			http.Error(rw, err.Error(), http.StatusInternalServerError)
		}),
	}
}

// heldBy describes the connected node id for its config dump: the node as
// its streams reported it and, per type, the version it last ACKed.
func heldBy(clients []xds.ClientStatus, id string) DumpOptions {
	opts := DumpOptions{Versions: map[string]string{}}
	for _, c := range clients {
		if c.ID != id {
			continue
		}
		opts.Node = &corev3.Node{Id: c.ID, Cluster: c.Cluster, UserAgentName: c.UserAgent}
		for _, t := range c.Types {
			opts.Versions[t.TypeURL] = t.AckedVersion
		}
	}
	return opts
}
