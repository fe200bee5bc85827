package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/config"
)

// serve runs the bridge of cfg until ctx is done. The configuration is
// reloaded with load on every SIGHUP, on POST /-/reload and, with
// reload.watch_config, when the file changes (see bridge.RequestReload,
// which also serves a storm of requests with one reload at a time). The
// signal is caught from the start, so that a SIGHUP sent before the bridge
// is up never terminates it (the default action for SIGHUP); one that
// arrives before Run is applied once Run runs.
func serve(ctx context.Context, cfg *config.Config, load func() (*config.Config, error), log *slog.Logger) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	in, err := bridge.New(cfg, log, bridge.Build{Version: version, Revision: buildRevision()})
	if err != nil {
		return err
	}
	in.ReloadFrom(load)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				// RequestReload logs and counts the outcome itself.
				_, _ = in.RequestReload(ctx, "SIGHUP")
			}
		}
	})
	err = in.Run(ctx)
	cancel()
	wg.Wait()
	return err
}
