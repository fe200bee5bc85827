package bridge

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/xds"
)

// newReclaimer returns the process's memory return policy of cfg, its
// counters exported on reg. The process is not quiet while srv has
// responses or requests in flight, and the resources srv serves measure
// its state: a registry that shrinks leaves garbage the allocation
// counter does not show.
func newReclaimer(cfg config.Memory, reg prometheus.Registerer, srv *xds.Server) *reclaim.Reclaimer {
	p := reclaim.DefaultPolicy
	p.Quiet = cfg.ReturnAfterQuiet
	p.Busy = func() bool { return srv.InFlight() > 0 }
	p.State = srv.Resources
	r := reclaim.New(p)
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "xdsbridge_memory_returns_total",
			Help: "Returns of the free heap to the OS (two collections each), after a burst of allocation was followed by memory.return_after_quiet of quiet.",
		}, func() float64 { return float64(r.Stats().Releases) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "xdsbridge_memory_returned_bytes_total",
			Help: "Heap returned to the OS by those collections.",
		}, func() float64 { return float64(r.Stats().Released) }),
	)
	return r
}
