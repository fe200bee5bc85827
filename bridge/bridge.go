// Package bridge wires a configuration into a running bridge: the sources
// and their manager, the translation of what they report into xDS
// resources, the xDS gRPC server and the admin HTTP listener.
package bridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/xdsbridge/xdsbridge/admin"
	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/internal/reclaim"
	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/static"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/xds"
)

const (
	// shutdownTimeout bounds the graceful part of a shutdown. xDS streams
	// live as long as their clients, so GracefulStop would wait forever for
	// them; after this long the remaining streams are cut.
	shutdownTimeout = 3 * time.Second
)

// Instance is a bridge ready to run: its listeners are bound and its
// sources built, but nothing runs until Run.
type Instance struct {
	log      *slog.Logger
	manager  *manager.Manager
	reload   *reloader
	services *serviceView
	pub      *publisher
	grpc     *grpc.Server
	http     *http.Server
	xdsLis   net.Listener
	adminLis net.Listener
	views    *views
	reclaim  *reclaim.Reclaimer
	// static reads the secrets and resource files; denials counts the
	// secrets refused to nodes without the grant.
	static  *static.Set
	denials *denials
	// version and started are what the status page says of the process.
	version string
	started time.Time
}

// Build identifies the running binary.
type Build struct {
	// Version is what `bridge version` prints; the status page shows it.
	Version string
	// Revision is the source revision it was built from ("" if unknown).
	Revision string
}

// New builds the sources of cfg and binds the xDS and admin listeners;
// build is exported as xdsbridge_build_info and shown on the status page.
// Configuration errors are *settings.KeyError values; a listen error names
// its key too (`xds.listen: listen tcp ...: address already in use`).
func New(cfg *config.Config, log *slog.Logger, build Build) (*Instance, error) {
	in := &Instance{log: log, services: newServiceView(), version: build.Version, started: time.Now()}
	reg := prometheus.NewRegistry()
	// Beside the usual Go metrics, go_gc_heap_live_bytes: the heap the last
	// collection found live, what the process really holds, which
	// go_memstats_heap_alloc_bytes (live and garbage since) is not.
	goMetrics := collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})
	reg.MustRegister(collectors.NewGoCollector(goMetrics), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(build))

	named, err := buildSources(cfg, log)
	if err != nil {
		return nil, err
	}
	in.manager = manager.NewManager(manager.Options{
		Sources:    named,
		Holdoff:    cfg.Holdoff.Min,
		MaxHoldoff: cfg.Holdoff.Max,
		Merge:      cfg.Merge,
		Logger:     log.With("component", "manager"),
		StateDir:   newStateDir(cfg, log),
	})
	reg.MustRegister(admin.SourceCollector{Sources: in.manager.Statuses}, readiness(in.manager.Pending),
		stateDirMetrics{in.manager.StateDirStatus})
	in.reload = newReloader(cfg, in.manager, log, reg)
	in.reload.scopes = func(s *translate.Scopes) { in.pub.scope(s) }

	server := xds.NewServer(xds.Options{
		Logger:           log.With("component", "xds"),
		UnknownNameWait:  cfg.XDS.UnknownNameWait,
		MaxResponseBytes: cfg.XDS.MaxResponseBytes,
		SendBudget:       cfg.XDS.SendBudgetBytes,
		RequestBudget:    cfg.XDS.RequestBudgetBytes,
		Registerer:       reg,
		ConfigCluster:    cfg.XDS.ConfigCluster,
		Limits:           xds.Limits(cfg.XDS.Limits),
		Collections:      IstioCollections(cfg.Istio),
		// The publisher exists by the time the first Apply can refuse, and
		// the denials by the time a client can subscribe.
		OnRefused: func(k xds.Key, err error) { in.pub.refused(k, err) },
		OnDenied:  func(n *corev3.Node, k xds.Key) { in.denials.deny(n, k) },
	})
	in.reclaim = newReclaimer(cfg.Memory, reg, server)
	reg.MustRegister(clientStates{server.Progress})
	if in.views, err = newViews(cfg, server, log); err != nil {
		return nil, err
	}
	in.pub = newPublisher(server, cfg.XDS.GRPC.Enabled, log.With("component", "publish"), reg).shape(cfg.Shaping, cfg.Chain).envoy(cfg.RouteRules, cfg.ListenerSet).scope(cfg.ScopeRules).serveIstio(cfg.Istio, reg)
	in.denials = newDenials(log.With("component", "secrets"), reg)
	if in.static, err = newStatic(cfg, log.With("component", "static"), reg); err != nil {
		return nil, err
	}
	in.pub.files(in.static.State())
	sec, err := newSecurity(cfg, log, reg)
	if err != nil {
		return nil, err
	}
	in.grpc = grpc.NewServer(append(slices.Concat(sec.grpcOpts, server.GRPCOptions(), TransportOptions()),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:                  cfg.XDS.Keepalive.Time,
			Timeout:               cfg.XDS.Keepalive.Timeout,
			MaxConnectionAge:      orInfinity(cfg.XDS.Keepalive.MaxConnectionAge),
			MaxConnectionAgeGrace: orInfinity(cfg.XDS.Keepalive.MaxConnectionAgeGrace),
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             cfg.XDS.Keepalive.MinClientInterval,
			PermitWithoutStream: true,
		}),
		// The engine's codec decodes the name lists that SotW ACKs repeat
		// once per distinct list (see xds.Codec).
		grpc.ForceServerCodecV2(xds.Codec()),
	)...)
	server.Register(in.grpc)
	var handler http.Handler = admin.Handler(admin.Options{
		Pending:  in.manager.Pending,
		Sources:  in.manager.Statuses,
		StateDir: in.manager.StateDirStatus,
		Gatherer: reg,
		Clients:  func() any { return in.views.clients(server.Clients()) },
		Confirm:  in.manager.ConfirmRemovals,
		Reload:   in.reload.answer,
		Handlers: debugHandlers(in.pub.why, server),
		PProf:    cfg.Admin.PProf,
		Status:   func() admin.Page { return in.page(server.Clients) },
	})
	if cfg.Admin.TokenFile != "" {
		requireToken, err := admin.RequireToken(cfg.Admin.TokenFile, log.With("component", "admin"))
		if err != nil {
			return nil, settings.Prefix("admin.token_file", err)
		}
		handler = requireToken(handler)
	}
	// REST polling on the admin listener is not behind the admin token:
	// Envoy's REST client cannot send one, and it reads only what the xDS
	// listener serves anyway.
	in.http = &http.Server{Handler: in.views.adminHandler(handler), ReadHeaderTimeout: 10 * time.Second}

	if in.xdsLis, err = net.Listen("tcp", cfg.XDS.Listen); err != nil {
		in.views.close()
		return nil, settings.Prefix("xds.listen", err)
	}
	if in.adminLis, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
		in.xdsLis.Close()
		in.views.close()
		return nil, settings.Prefix("admin.listen", err)
	}
	if sec.adminTLS != nil {
		in.adminLis = tls.NewListener(in.adminLis, sec.adminTLS)
	}
	return in, nil
}

// buildSources builds the configured sources, each with its status.
func buildSources(cfg *config.Config, log *slog.Logger) ([]manager.Named, error) {
	named := make([]manager.Named, 0, len(cfg.Entries))
	for _, e := range cfg.Entries {
		n, err := newNamed(cfg, e, log)
		if err != nil {
			return nil, err
		}
		named = append(named, n)
	}
	return named, nil
}

// orInfinity maps 0, the configuration's "off", to gRPC's "never".
func orInfinity(d time.Duration) time.Duration {
	if d == 0 {
		return time.Duration(math.MaxInt64)
	}
	return d
}

// XDSAddr returns the address the xDS listener is bound to.
func (in *Instance) XDSAddr() net.Addr { return in.xdsLis.Addr() }

// AdminAddr returns the address the admin listener is bound to.
func (in *Instance) AdminAddr() net.Addr { return in.adminLis.Addr() }

// Run serves until ctx is done, then stops gracefully: the gRPC server gets
// shutdownTimeout to finish, then its streams are cut. It returns nil after
// a stop requested through ctx and an error if a listener failed.
func (in *Instance) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	in.log.Info("serving xDS", "addr", in.xdsLis.Addr().String())
	in.log.Info("serving admin", "addr", in.adminLis.Addr().String())

	var wg sync.WaitGroup
	in.views.run(ctx, &wg, cancel)
	wg.Go(func() { in.reclaim.Run(ctx) })
	// The configuration watch is read before reloads are served: a first
	// reload holds the reloader's lock while it loads, and Run must not
	// wait behind it.
	w := in.reload.watch()
	wg.Go(func() { in.reload.serve(ctx) })
	if w != nil {
		wg.Go(func() { w.run(ctx) })
	}
	wg.Go(func() { in.static.Run(ctx, func(st static.State) { in.pub.files(st) }) })
	wg.Go(func() {
		publish := func(c manager.Changes) {
			in.pub.publish(c)
			in.services.record(c)
		}
		if err := in.manager.Run(ctx, publish); err != nil {
			cancel(fmt.Errorf("running sources: %w", err))
		}
	})
	wg.Go(func() {
		if err := in.grpc.Serve(in.xdsLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			cancel(fmt.Errorf("serving xDS: %w", err))
		}
	})
	wg.Go(func() {
		if err := in.http.Serve(in.adminLis); !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("serving admin: %w", err))
		}
	})
	<-ctx.Done()
	in.log.Info("shutting down")
	in.stop()
	wg.Wait()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// stop stops both servers, gracefully within shutdownTimeout.
func (in *Instance) stop() {
	timer := time.NewTimer(shutdownTimeout)
	defer timer.Stop()
	stopped := make(chan struct{})
	go func() {
		in.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-timer.C:
		in.log.Info("cutting the xDS streams still open", "after", shutdownTimeout)
		in.grpc.Stop()
		<-stopped
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := in.http.Shutdown(sctx); err != nil {
		in.http.Close()
	}
}

// newStatic reads the secrets and resource files of cfg once; an error
// names the entry's key. reg, if set, gets the reload counters.
func newStatic(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (*static.Set, error) {
	opts := static.Options{Logger: log, Registerer: reg, Reserved: map[string][]string{"route": cfg.RouteRules.Configs()}}
	for _, l := range cfg.ListenerSet {
		opts.Reserved["listener"] = append(opts.Reserved["listener"], l.Resource.GetName())
	}
	for _, s := range cfg.SecretFiles {
		opts.Secrets = append(opts.Secrets, static.SecretSpec{Key: s.Key(), Name: s.Name,
			CertificateFile: s.CertificateFile, PrivateKeyFile: s.PrivateKeyFile, CAFile: s.CAFile, Grant: s.Grant})
	}
	for _, f := range cfg.ResourceFiles {
		opts.Files = append(opts.Files, static.FileSpec{Key: f.Key(), File: f.File, Scopes: f.Scopes, Grant: f.Grant})
	}
	return static.New(opts)
}
