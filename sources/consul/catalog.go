package consul

import (
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

// catalog is what the source knows of the selected services of each
// watched datacenter: one record per service. The other parts keep their
// state about a service in its record (what was served, the reads pending,
// its watch, the sweep waiting for it), so that forgetting a service is
// deleting its record: the queues and lists that name it skip a key whose
// record is gone.
type catalog []*dcState

// svcKey names one Consul service in one watched datacenter.
type svcKey struct {
	dc   int
	name string
}

// checkKey names one check of the catalog.
type checkKey struct{ node, id string }

// svcState is the record of one selected service.
type svcState struct {
	key     svcKey
	tags    []string // from /v1/catalog/services (union over instances)
	cluster string   // rendered cluster_name
	// seen: what the answers applied last said (publisher.serveAnswer).
	seen seenState
	// read: the reads pending (readQueue).
	read readState
	// watch: the service's watch (watchSet), nil when it has none.
	watch *watchRun
	// sweep: the running sweep waits for a read of the service.
	sweep *sweepBatch
}

// seenState is what the answers about a service applied last said.
type seenState struct {
	fetched bool // read successfully at least once
	mesh    bool // only proxies or gateways: not served (keep_mesh)
	index   uint64
	// peekIndex: the index the last peek of a sweep saw.
	peekIndex uint64
	// changedAt: when an answer last changed what is served (the watches
	// go to the services that changed last).
	changedAt time.Time
	dropped   int // instances the last answer left out as unservable
	eps       []sources.Endpoint
	// The nodes and checks the last answer showed, to tell which later
	// health and node changes concern this service.
	nodes  map[string]uint64   // node name -> node ModifyIndex
	checks map[checkKey]string // check -> status
	// hostLogged: its instances with a host name were logged.
	hostLogged bool
}

// dcState is what the source knows of one datacenter.
type dcState struct {
	name        string
	m           mapping
	catalogSeen bool
	services    map[string]*svcState
	checks      map[checkKey]checkInfo // last /v1/health/state/any; nil before the first
}

type checkInfo struct {
	status, service, node string
	index                 uint64 // ModifyIndex
}

func newCatalog(cfg *Config, names []string) catalog {
	c := make(catalog, 0, len(names))
	for i, name := range names {
		c = append(c, &dcState{
			name:     name,
			services: map[string]*svcState{},
			m: mapping{
				addressSource:   cfg.AddressSource,
				warningDegraded: cfg.Warning == WarningDegrade,
				criticalDrop:    cfg.Critical == CriticalDrop,
				keepMesh:        cfg.KeepMesh,
				locality:        cfg.Locality,
				datacenter:      name,
				priority:        cfg.priority(i, name),
			},
		})
	}
	return c
}

// find returns the record of service k, nil when it has none.
func (c catalog) find(k svcKey) *svcState { return c[k.dc].services[k.name] }

// each calls fn for every record.
func (c catalog) each(fn func(*svcState)) {
	for _, d := range c {
		for _, st := range d.services {
			fn(st)
		}
	}
}

// inOrder calls fn for every record, datacenter by datacenter, services
// by name: where only some services get something (a watch, a place in a
// sweep), the same ones get it every time.
func (c catalog) inOrder(fn func(*svcState)) {
	for _, d := range c {
		for _, st := range sortedServices(d) {
			fn(st)
		}
	}
}

// sortedServices returns the records of datacenter d by name.
func sortedServices(d *dcState) []*svcState {
	out := make([]*svcState, 0, len(d.services))
	for _, name := range slices.Sorted(maps.Keys(d.services)) {
		out = append(out, d.services[name])
	}
	return out
}

// count is the number of services.
func (c catalog) count() int {
	n := 0
	for _, d := range c {
		n += len(d.services)
	}
	return n
}

// unwatched reports whether datacenter dc has services without a watch.
func (c catalog) unwatched(dc int) bool {
	for _, st := range c[dc].services {
		if st.watch == nil {
			return true
		}
	}
	return false
}

func (d *dcState) servicesByNode() map[string][]string {
	m := map[string][]string{}
	for name, st := range d.services {
		for node := range st.seen.nodes {
			m[node] = append(m[node], name)
		}
	}
	return m
}

// seenIn records the nodes and checks an answer returned.
func seenIn(entries []*api.ServiceEntry) (map[string]uint64, map[checkKey]string) {
	nodes := map[string]uint64{}
	checks := map[checkKey]string{}
	for _, e := range entries {
		if e == nil || e.Node == nil {
			continue
		}
		nodes[e.Node.Node] = e.Node.ModifyIndex
		for _, c := range e.Checks {
			checks[checkKey{c.Node, c.CheckID}] = c.Status
		}
	}
	return nodes, checks
}

func endpointsEqual(a, b []sources.Endpoint) bool {
	return slices.EqualFunc(a, b, sources.Endpoint.Equal)
}
