package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/xds"
	"github.com/xdsbridge/xdsbridge/xds/files"
	"github.com/xdsbridge/xdsbridge/xds/rest"
)

// views are the deliveries of the xDS store besides the gRPC streams: REST
// polling (on the admin listener or its own) and watched-file outputs.
type views struct {
	log     *slog.Logger
	rest    *rest.Handler // nil: REST disabled
	restLis net.Listener  // nil: REST on the admin listener
	restSrv *http.Server
	writers []*files.Writer
}

// newViews builds the views cfg asks for. Errors name their key: a bad
// output directory is outputs[i].dir, a listen error xds.rest.listen.
func newViews(cfg *config.Config, server *xds.Server, log *slog.Logger) (*views, error) {
	v := &views{log: log}
	for i, o := range cfg.Outputs {
		w, err := files.New(files.Options{
			Server:   server,
			Dir:      o.Dir,
			EnvoyDir: o.EnvoyDir,
			CDS:      o.CDS(),
			Logger:   log.With("component", "files", "dir", o.Dir),
		})
		if err != nil {
			return nil, settings.Prefix(fmt.Sprintf("outputs[%d].dir", i), err)
		}
		v.writers = append(v.writers, w)
	}
	r := cfg.XDS.REST
	if !r.Enabled {
		return v, nil
	}
	v.rest = rest.New(rest.Options{
		Server:          server,
		ConfigCluster:   cfg.XDS.ConfigCluster,
		RefreshDelay:    r.RefreshDelay,
		MaxRequestBytes: r.MaxRequestBytes,
		Logger:          log.With("component", "rest"),
	})
	if r.Listen != config.RESTOnAdmin {
		lis, err := net.Listen("tcp", r.Listen)
		if err != nil {
			return nil, settings.Prefix("xds.rest.listen", err)
		}
		v.restLis = lis
		v.restSrv = &http.Server{Handler: v.mux(http.NotFoundHandler()), ReadHeaderTimeout: 10 * time.Second}
	}
	return v, nil
}

// mux serves the REST paths (when REST is on) and everything else with h.
func (v *views) mux(h http.Handler) http.Handler {
	if v.rest == nil {
		return h
	}
	m := http.NewServeMux()
	for _, p := range rest.Paths() {
		m.Handle(p, v.rest)
	}
	m.Handle("/", h)
	return m
}

// adminHandler is h plus the REST paths when REST is on the admin listener.
func (v *views) adminHandler(h http.Handler) http.Handler {
	if v.restLis != nil {
		return h
	}
	return v.mux(h)
}

// clients adds the REST pollers to the streams, for /clients.
func (v *views) clients(streams []xds.ClientStatus) []xds.ClientStatus {
	if v.rest == nil {
		return streams
	}
	return append(streams, v.rest.Clients()...)
}

// run runs the views until ctx is done; a failing REST listener cancels
// the bridge with its error.
func (v *views) run(ctx context.Context, wg *sync.WaitGroup, cancel context.CancelCauseFunc) {
	for _, w := range v.writers {
		wg.Go(func() { _ = w.Run(ctx) })
	}
	if v.restLis == nil {
		return
	}
	v.log.Info("serving xDS REST", "addr", v.restLis.Addr().String())
	wg.Go(func() {
		if err := v.restSrv.Serve(v.restLis); !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("serving xDS REST: %w", err))
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), time.Second)
		defer c()
		if err := v.restSrv.Shutdown(sctx); err != nil {
			v.restSrv.Close()
		}
	})
}

// close releases the listener of a bridge that never ran.
func (v *views) close() {
	if v.restLis != nil {
		v.restLis.Close()
	}
}
