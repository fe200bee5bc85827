package envoysim

import (
	"fmt"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// What a client with Options.Listeners does besides the protocol, as
// Envoy does it (see https://www.envoyproxy.io/docs/envoy/latest/
// intro/arch_overview/upstream/cluster_manager and the listener
// manager's warming):
//   - A new EDS cluster warms until its assignment arrives; until then it
//     takes no traffic, and a request routed to it meets "no cluster"
//     (503, response flag NC), like one routed to a cluster it does not
//     have. A cluster that changes keeps serving while it warms again. A
//     cluster of another type is ready at once.
//   - A new listener warms until every route configuration its HTTP
//     connection managers take by RDS, and every secret its TLS contexts
//     take by SDS, has arrived; a listener that changes keeps serving in
//     its old version meanwhile.
//   - After every response it applies, the client sends a simulated
//     request down every route of every active listener (and to the
//     cluster of every TCP proxy) and counts those that met a warming or
//     missing cluster (Traffic.Misses). It also counts the resources that
//     arrived out of make-before-break order: a route configuration or
//     listener naming a cluster that is not ready yet, and the removal of
//     a cluster that an active listener's routes still name
//     (Traffic.OutOfOrder).

// Traffic is what the simulated requests of a client met.
type Traffic struct {
	// Requests is the number of simulated requests sent, Misses those of
	// them that met a warming or missing cluster.
	Requests, Misses int64
	// OutOfOrder counts resources received before what they need, and
	// removals of what an active route still needs.
	OutOfOrder int64
	// LastMiss and LastOutOfOrder describe the latest of each, for a
	// test's failure message.
	LastMiss, LastOutOfOrder string
}

// refs are what a listener refers to: the route configurations of its
// connection managers (RDS), the secrets of its TLS contexts (SDS) and
// the clusters of its TCP proxies, each sorted.
type refs struct {
	routes, secrets, clusters []string
	// inline are the route configurations held inside the listener.
	inline []*routev3.RouteConfiguration
	tcp    string // the first TCP proxy's cluster
}

// listenerRefs reads what a listener refers to.
func listenerRefs(l *listenerv3.Listener) *refs {
	r := &refs{}
	chains := append(slices.Clone(l.GetFilterChains()), l.GetDefaultFilterChain())
	hcms := []*anypb.Any{l.GetApiListener().GetApiListener()}
	for _, fc := range chains {
		for _, f := range fc.GetFilters() {
			hcms = append(hcms, f.GetTypedConfig())
		}
		tls := &tlsv3.DownstreamTlsContext{}
		if a := fc.GetTransportSocket().GetTypedConfig(); a != nil && a.MessageIs(tls) && a.UnmarshalTo(tls) == nil {
			ctx := tls.GetCommonTlsContext()
			for _, s := range ctx.GetTlsCertificateSdsSecretConfigs() {
				r.secrets = append(r.secrets, s.GetName())
			}
			if v := ctx.GetValidationContextSdsSecretConfig(); v != nil {
				r.secrets = append(r.secrets, v.GetName())
			}
		}
	}
	for _, a := range hcms {
		hcm, tp := &hcmv3.HttpConnectionManager{}, &tcpproxyv3.TcpProxy{}
		switch {
		case a == nil:
		case a.MessageIs(hcm) && a.UnmarshalTo(hcm) == nil:
			if rds := hcm.GetRds(); rds != nil {
				r.routes = append(r.routes, rds.GetRouteConfigName())
			} else if rc := hcm.GetRouteConfig(); rc != nil {
				r.inline = append(r.inline, rc)
			}
		case a.MessageIs(tp) && a.UnmarshalTo(tp) == nil:
			r.clusters = append(r.clusters, tp.GetCluster())
			if r.tcp == "" {
				r.tcp = tp.GetCluster()
			}
		}
	}
	for _, l := range [][]string{r.routes, r.secrets, r.clusters} {
		slices.Sort(l)
	}
	r.routes, r.secrets, r.clusters = slices.Compact(r.routes), slices.Compact(r.secrets), slices.Compact(r.clusters)
	return r
}

// warmth is the client's Envoy model: what is ready to take traffic.
// Guarded by Client.mu.
type warmth struct {
	// ready are the clusters that take traffic; warming those waiting for
	// their assignment.
	ready, warming map[string]bool
	// active and pending are each listener's serving and warming
	// versions.
	active, pending map[string]*refs
	routes          map[string]*routev3.RouteConfiguration
	secrets         map[string]bool
	traffic         Traffic
}

func newWarmth() *warmth {
	return &warmth{ready: map[string]bool{}, warming: map[string]bool{}, active: map[string]*refs{},
		pending: map[string]*refs{}, routes: map[string]*routev3.RouteConfiguration{}, secrets: map[string]bool{}}
}

// clusters applies upserted and removed clusters.
func (w *warmth) clusters(up []decoded, removed []string) {
	for _, name := range removed {
		if r := w.namedBy(name); r != "" {
			w.outOfOrder("cluster %s removed while %s still routes to it", name, r)
		}
		delete(w.ready, name)
		delete(w.warming, name)
	}
	for _, d := range up {
		c, ok := d.msg.(*clusterv3.Cluster)
		switch {
		case ok && c.GetType() != clusterv3.Cluster_EDS:
			w.ready[d.name] = true
			delete(w.warming, d.name)
		case !w.ready[d.name]:
			w.warming[d.name] = true
		}
	}
}

// assignments applies received assignments: their clusters are warm.
func (w *warmth) assignments(up []decoded) {
	for _, d := range up {
		if w.warming[d.name] {
			delete(w.warming, d.name)
			w.ready[d.name] = true
		}
	}
}

// listeners applies upserted and removed listeners.
func (w *warmth) listeners(up []decoded, removed []string) {
	for _, name := range removed {
		delete(w.active, name)
		delete(w.pending, name)
	}
	for _, d := range up {
		r := d.refs
		if r == nil {
			continue
		}
		for _, c := range r.clusters {
			if !w.ready[c] {
				w.outOfOrder("listener %s arrived before its cluster %s was ready", d.name, c)
			}
		}
		w.pending[d.name] = r
	}
	w.promote()
}

// routeConfigs applies upserted and removed route configurations.
func (w *warmth) routeConfigs(up []decoded, removed []string) {
	for _, name := range removed {
		delete(w.routes, name)
	}
	for _, d := range up {
		a, _ := d.msg.(*anypb.Any)
		rc := &routev3.RouteConfiguration{}
		if a == nil || a.UnmarshalTo(rc) != nil {
			continue
		}
		w.routes[d.name] = rc
		for _, c := range routeClusters(rc) {
			if !w.ready[c] {
				w.outOfOrder("route configuration %s arrived naming cluster %s, not ready", d.name, c)
			}
		}
	}
	w.promote()
}

// secretsIn applies upserted and removed secrets.
func (w *warmth) secretsIn(up []decoded, removed []string) {
	for _, name := range removed {
		delete(w.secrets, name)
	}
	for _, d := range up {
		w.secrets[d.name] = true
	}
	w.promote()
}

// promote makes the pending listeners whose routes and secrets have all
// arrived active.
func (w *warmth) promote() {
	for name, r := range w.pending {
		warm := true
		for _, rt := range r.routes {
			warm = warm && w.routes[rt] != nil
		}
		for _, s := range r.secrets {
			warm = warm && w.secrets[s]
		}
		if warm {
			w.active[name] = r
			delete(w.pending, name)
		}
	}
}

// probe sends one simulated request down every route of every active
// listener.
func (w *warmth) probe() {
	for name, r := range w.active {
		for _, c := range r.clusters {
			w.request(name, c)
		}
		for _, rc := range w.configsOf(r) {
			for _, c := range routeClusters(rc) {
				w.request(name, c)
			}
		}
	}
}

func (w *warmth) request(listener, cluster string) {
	w.traffic.Requests++
	if !w.ready[cluster] {
		w.traffic.Misses++
		state := "missing"
		if w.warming[cluster] {
			state = "warming"
		}
		w.traffic.LastMiss = fmt.Sprintf("listener %s routed a request to cluster %s, %s", listener, cluster, state)
	}
}

func (w *warmth) outOfOrder(format string, args ...any) {
	w.traffic.OutOfOrder++
	w.traffic.LastOutOfOrder = fmt.Sprintf(format, args...)
}

// configsOf are the route configurations an active listener uses.
func (w *warmth) configsOf(r *refs) []*routev3.RouteConfiguration {
	out := slices.Clone(r.inline)
	for _, name := range r.routes {
		if rc := w.routes[name]; rc != nil {
			out = append(out, rc)
		}
	}
	return out
}

// namedBy names an active listener whose routes name cluster, "" if none.
func (w *warmth) namedBy(cluster string) string {
	for name, r := range w.active {
		if slices.Contains(r.clusters, cluster) {
			return "listener " + name
		}
		for _, rc := range w.configsOf(r) {
			if slices.Contains(routeClusters(rc), cluster) {
				return "route configuration " + rc.GetName()
			}
		}
	}
	return ""
}

// routeClusters are the clusters the routes of rc go to.
func routeClusters(rc *routev3.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			ra := r.GetRoute()
			if c := ra.GetCluster(); c != "" {
				out = append(out, c)
			}
			for _, wc := range ra.GetWeightedClusters().GetClusters() {
				out = append(out, wc.GetName())
			}
		}
	}
	return out
}

// Response is what a simulated request met: the cluster it went to, and
// the HTTP status Envoy would answer with when it does not reach one
// (404 no route, 503 no cluster) with Envoy's response flag (NR, NC).
type Response struct {
	Cluster string
	Status  int
	Flag    string
}

// Request routes a simulated request for host and path through the
// active listener of that name, as Envoy would: its route configuration
// picks the virtual host by domain and the first route by path prefix,
// whose cluster must be ready. A TCP proxy listener goes to its cluster.
// A listener that is not active answers nothing (Status 0).
func (c *Client) Request(listener, host, path string) Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.warm
	if w == nil {
		return Response{}
	}
	r := w.active[listener]
	if r == nil {
		return Response{}
	}
	cluster := r.tcp
	if cluster == "" {
		cluster = route(w.configsOf(r), host, path)
		if cluster == "" {
			return Response{Status: 404, Flag: "NR"}
		}
	}
	if !w.ready[cluster] {
		return Response{Cluster: cluster, Status: 503, Flag: "NC"}
	}
	return Response{Cluster: cluster, Status: 200}
}

// Traffic returns what the simulated requests met so far.
func (c *Client) Traffic() Traffic {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.warm == nil {
		return Traffic{}
	}
	return c.warm.traffic
}

// route is the cluster Envoy routes host and path to in rcs (the first
// configuration with a matching virtual host decides), "" for none.
// Virtual hosts are picked as Envoy does: an exact domain, then the
// longest "*.suffix", then the longest "prefix.*", then "*".
func route(rcs []*routev3.RouteConfiguration, host, path string) string {
	host = strings.ToLower(host)
	for _, rc := range rcs {
		var best *routev3.VirtualHost
		bestRank, bestLen := 0, 0
		for _, vh := range rc.GetVirtualHosts() {
			for _, d := range vh.GetDomains() {
				rank := 0
				switch {
				case d == host:
					rank = 4
				case strings.HasPrefix(d, "*") && len(d) > 1 && strings.HasSuffix(host, d[1:]):
					rank = 3
				case strings.HasSuffix(d, "*") && len(d) > 1 && strings.HasPrefix(host, d[:len(d)-1]):
					rank = 2
				case d == "*":
					rank = 1
				}
				if rank > bestRank || (rank == bestRank && rank > 0 && len(d) > bestLen) {
					best, bestRank, bestLen = vh, rank, len(d)
				}
			}
		}
		if best == nil {
			continue
		}
		for _, r := range best.GetRoutes() {
			switch m := r.GetMatch().GetPathSpecifier().(type) {
			case *routev3.RouteMatch_Prefix:
				if strings.HasPrefix(path, m.Prefix) {
					return r.GetRoute().GetCluster()
				}
			case *routev3.RouteMatch_Path:
				if path == m.Path {
					return r.GetRoute().GetCluster()
				}
			}
		}
		return ""
	}
	return ""
}
