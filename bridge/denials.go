package bridge

import (
	"log/slog"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsbridge/xdsbridge/xds"
)

// denials counts and logs the subscriptions to a secret by nodes whose
// scope is not granted it (xds.Options.OnDenied): each is counted, and
// logged once per node and secret. The set of pairs logged is bounded, as
// clients choose what they ask for: when full it starts over, so a
// persistent offender is logged again, rarely. The engine calls deny from
// its streams' goroutines: mu guards logged.
type denials struct {
	log     *slog.Logger
	counter prometheus.Counter

	mu     sync.Mutex
	logged map[[2]string]struct{}
}

// newDenials returns the denials, which log to log and register their
// counter, xdsbridge_secrets_denied_total, with reg.
func newDenials(log *slog.Logger, reg prometheus.Registerer) *denials {
	counter := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xdsbridge_secrets_denied_total",
		Help: "Subscriptions to a secret by a node whose scope is not granted it; the node is answered as if it did not exist.",
	})
	reg.MustRegister(counter)
	return &denials{log: log, counter: counter, logged: map[[2]string]struct{}{}}
}

// deny is the engine's OnDenied: it runs under the engine's locks, so it
// only counts, and logs what is new.
func (d *denials) deny(n *corev3.Node, k xds.Key) {
	d.counter.Inc()
	key := [2]string{n.GetId(), k.Name}
	d.mu.Lock()
	_, seen := d.logged[key]
	if !seen {
		if len(d.logged) >= maxDeniedLogged {
			d.logged = map[[2]string]struct{}{}
		}
		d.logged[key] = struct{}{}
	}
	d.mu.Unlock()
	if !seen {
		d.log.Warn("refusing a secret to a node whose scope is not granted it; answered as absent",
			"node_id", n.GetId(), "node_cluster", n.GetCluster(), "secret", k.Name)
	}
}
