package bridge

import (
	"net/http"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsbridge/xdsbridge/admin"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/xds"
)

// why keeps the services as last served (after transforms), for
// /debug/why. The publisher writes it, admin requests read it.
type why struct {
	mu       sync.RWMutex
	services map[string]sources.Service
	shaping  *translate.Shaping
}

func (w *why) set(svc sources.Service) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.services[svc.Name] = svc
}

func (w *why) remove(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.services, name)
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

// explain returns the provenance of cluster name, false if it is not served.
func (w *why) explain(name string) (Why, bool) {
	w.mu.RLock()
	svc, ok := w.services[name]
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
	return out, true
}

// debugHandlers are the admin endpoints of this package:
//
//	/debug/why?cluster=C          provenance of cluster C's endpoints
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
			name := r.URL.Query().Get("cluster")
			if name == "" {
				http.Error(rw, "the cluster parameter is required: /debug/why?cluster=NAME", http.StatusBadRequest)
				return
			}
			ans, ok := w.explain(name)
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
				if d, ok = server.Held(node); !ok {
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
