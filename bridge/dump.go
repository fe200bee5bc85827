package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/internal/sensitive"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/translate/istio"
	"github.com/xdsbridge/xdsbridge/xds"
)

// collector is an applier that keeps the resources of every Apply.
type collector struct{ upserts []xds.Resource }

func (c *collector) Apply(upserts []xds.Resource, _ []xds.Key) {
	c.upserts = append(c.upserts, upserts...)
}

// failPoll is how often Snapshot looks for a failed first read. A source
// records failures in its Status without telling anyone, so a dry run that
// must stop at the first one asks.
const failPoll = 50 * time.Millisecond

// Snapshot runs every source of cfg until each has reported its state once,
// then transforms, translates and shapes that state exactly as a running
// bridge does, and returns the resources it would serve. It fails as soon
// as a source that has not reported yet fails a read, with that source's
// error: a dry run has no registry outage to ride out. When ctx ends first,
// the error names the sources that had not reported.
func Snapshot(ctx context.Context, cfg *config.Config, log *slog.Logger) ([]xds.Resource, error) {
	named, err := buildSources(cfg, log)
	if err != nil {
		return nil, err
	}
	m := manager.NewManager(manager.Options{Sources: named, Merge: cfg.Merge, Logger: log.With("component", "manager")})
	var wg sync.WaitGroup
	defer wg.Wait()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wg.Go(func() { watchFailures(runCtx, named, cancel) })
	var first *manager.Changes
	if err := m.Run(runCtx, func(c manager.Changes) {
		if first == nil {
			first = &c
			cancel(nil)
		}
	}); err != nil {
		return nil, err
	}
	if first == nil {
		if err := context.Cause(runCtx); err != nil && ctx.Err() == nil {
			return nil, err
		}
		return nil, fmt.Errorf("sources did not report before the deadline: %s", strings.Join(m.Pending(), ", "))
	}
	col := &collector{}
	p := newPublisher(col, cfg.XDS.GRPC.Enabled, log.With("component", "publish"), prometheus.NewRegistry())
	st, err := newStatic(cfg, log.With("component", "static"), nil)
	if err != nil {
		return nil, err
	}
	p.shape(cfg.Shaping, cfg.Chain).envoy(cfg.RouteRules, cfg.ListenerSet).scope(cfg.ScopeRules).
		serveIstio(cfg.Istio, prometheus.NewRegistry()).files(st.State()).publish(*first)
	return col.upserts, nil
}

// watchFailures cancels ctx with a source's error once a source that has
// not synced records a failed read; it returns when ctx ends.
func watchFailures(ctx context.Context, named []manager.Named, cancel context.CancelCauseFunc) {
	tick := time.NewTicker(failPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, n := range named {
			if s := n.Status.Snapshot(); !s.Synced && s.Failures > 0 {
				cancel(fmt.Errorf("source %s: %s", n.Name, s.LastError))
				return
			}
		}
	}
}

// Client returns the node of a client: id and cluster as given, and the
// user_agent_name by which the server tells proxyless gRPC clients from
// Envoys.
func Client(id, cluster string, grpc bool) *corev3.Node {
	agent := "envoy"
	if grpc {
		agent = "grpc-go"
	}
	return &corev3.Node{Id: id, Cluster: cluster, UserAgentName: agent}
}

// ForNode returns, per type URL, the resources of rs that node n receives
// with wildcard subscriptions (see xds.Resource.ForNode), in its scope by
// scopes (nil: no scoping), with the versions the server gives them,
// limited to types when not empty, sorted by name like the server's dumps,
// private keys redacted. Secrets are among them when the node's scope is
// granted them, as if it asked for each by name.
func ForNode(rs []xds.Resource, n *corev3.Node, scopes *translate.Scopes, types ...string) (xds.Dump, error) {
	d := xds.Dump{}
	id, _ := scopes.Of(n)
	for _, r := range rs {
		if len(types) > 0 && !slices.Contains(types, r.Type) || !r.InScope(id) {
			continue
		}
		m, ok := r.ForNode(n)
		if !ok {
			continue
		}
		v, err := xds.Version(m)
		if err != nil {
			return nil, err
		}
		m, _ = sensitive.Redact(m)
		a, err := anypb.New(m)
		if err != nil {
			return nil, fmt.Errorf("packing %s %q: %w", r.Type, r.Name, err)
		}
		d[r.Type] = append(d[r.Type], xds.Dumped{Name: r.Name, Version: v, Resource: a})
	}
	for _, list := range d {
		slices.SortFunc(list, func(a, b xds.Dumped) int { return strings.Compare(a.Name, b.Name) })
	}
	return d, nil
}

// TypeURLs maps the short type names of `bridge dump --type` to type URLs.
var TypeURLs = map[string]string{
	"cds": resource.ClusterType, "eds": resource.EndpointType,
	"lds": resource.ListenerType, "rds": resource.RouteType, "sds": resource.SecretType,
	"serviceentry": MCPDumpTypes[0], "workloadentry": MCPDumpTypes[1],
}

// MCPDumpTypes are the collections `bridge dump --mcp` prints: the type
// URLs current istiod versions ask for (older ones ask for the same
// resources under v1alpha3).
var MCPDumpTypes = []string{istio.ServiceEntry.TypeURLs()[0], istio.WorkloadEntry.TypeURLs()[0]}
