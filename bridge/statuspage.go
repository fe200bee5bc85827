package bridge

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/admin"
	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/xds"
)

// serviceView counts, per published service, what the status page shows.
// The publisher records every change; the admin handler reads.
type serviceView struct {
	mu   sync.Mutex
	rows map[string]admin.ServiceRow
	peak int // the most rows held (reclaim.Map)
}

func newServiceView() *serviceView { return &serviceView{rows: map[string]admin.ServiceRow{}} }

func (v *serviceView) record(c manager.Changes) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, svc := range c.Upserted {
		row := admin.ServiceRow{Name: svc.Name, Endpoints: len(svc.Endpoints)}
		tiers := map[uint32]bool{}
		for _, e := range svc.Endpoints {
			if e.Health == sources.HealthHealthy || e.Health == sources.HealthUnknown {
				row.Healthy++
			}
			tiers[e.Priority] = true
		}
		row.Priorities = len(tiers)
		v.rows[svc.Name] = row
	}
	for _, name := range c.Removed {
		delete(v.rows, name)
	}
	v.rows = reclaim.Map(v.rows, &v.peak)
}

func (v *serviceView) list() []admin.ServiceRow {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.SortedFunc(maps.Values(v.rows), func(a, b admin.ServiceRow) int { return cmp.Compare(a.Name, b.Name) })
}

// page gathers the status page's content.
func (in *Instance) page(clients func() []xds.ClientStatus) admin.Page {
	loaded := in.reload.loaded.Load()
	p := admin.Page{Now: time.Now(), Pending: in.manager.Pending(), Sources: in.manager.Statuses(), Services: in.services.list(),
		State: in.manager.StateDirStatus(),
		About: admin.About{Version: in.version, Started: in.started, ConfigPath: loaded.path, Loaded: loaded.at, Rejected: loaded.rejected}}
	for _, c := range clients() {
		p.Clients = append(p.Clients, clientRow(c))
	}
	return p
}

// clientRow is a stream's row on the status page.
func clientRow(c xds.ClientStatus) admin.ClientRow {
	row := admin.ClientRow{ID: c.ID, Cluster: c.Cluster, Variant: c.Variant, Peer: c.Peer, Connected: c.Connected}
	for _, t := range c.Types {
		tr := admin.TypeRow{
			Type: shortType(t.TypeURL), Sent: t.LastVersion, Acked: t.AckedVersion,
			Lag: versionLag(t.LastVersion, t.AckedVersion), Pending: t.Pending,
			Subscribed: t.Subscribed, Wildcard: t.Wildcard,
		}
		if n := t.NACK; n != nil {
			tr.NACK, tr.NACKAt, tr.NACKs, tr.NACKedVersion = n.Error, n.At, n.Count, n.Version
		}
		row.Types = append(row.Types, tr)
	}
	return row
}

// versionLag is how many responses a client has not ACKed: the engine's
// versions are per-stream counters, so the difference of the latest sent
// and the latest ACKed one counts them. Anything else counts as 0.
func versionLag(sent, acked string) int {
	s, err1 := strconv.Atoi(sent)
	a, err2 := strconv.Atoi(cmp.Or(acked, "0"))
	if err1 != nil || err2 != nil || s < a {
		return 0
	}
	return s - a
}

// shortType names the four xDS types the way operators say them.
func shortType(url string) string {
	for suffix, short := range map[string]string{
		".cluster.v3.Cluster": "CDS", ".endpoint.v3.ClusterLoadAssignment": "EDS",
		".listener.v3.Listener": "LDS", ".route.v3.RouteConfiguration": "RDS",
	} {
		if strings.HasSuffix(url, suffix) {
			return short
		}
	}
	return url
}
