// Package admin serves the bridge's HTTP admin endpoints (Handler lists
// them): liveness and readiness, the status of the sources, of the state
// directory and of the xDS clients, Prometheus metrics and the source
// metrics (SourceCollector), the HTML status page, the removal guard's
// confirmation, a reload, and pprof when enabled. It reads everything
// through the functions of Options, so that it knows the manager's types
// but not how the bridge is wired; RequireToken puts a bearer token in
// front of every endpoint but the probes.
package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xdsbridge/xdsbridge/manager"
)

// Options say where the handler reads what it serves. Pending and Sources
// are required; the others are optional.
type Options struct {
	// Pending returns the names of the sources that have not completed
	// their first sync; the bridge is ready when it is empty.
	Pending func() []string
	// Sources returns the status of every source.
	Sources func() []manager.SourceStatus
	// StateDir returns how persisting the state for warm starts (state_dir)
	// goes, for /state and /readyz; nil leaves /state out.
	StateDir func() manager.StateDirStatus
	// Gatherer serves /metrics; nil leaves it out.
	Gatherer prometheus.Gatherer
	// Clients returns a JSON-encodable view of the connected xDS clients
	// for /clients; nil leaves it out.
	Clients func() any
	// Handlers are further endpoints by mux pattern, such as
	// "GET /debug/why".
	Handlers map[string]http.Handler
	// PProf serves the Go profiler under /debug/pprof/ (GET only). It is
	// off by default: profiles expose memory contents and the command line,
	// and a CPU profile costs the process while it runs.
	PProf bool
	// Status returns what the HTML status page at / shows; nil leaves the
	// page out.
	Status func() Page
	// Confirm applies the removals a source's guard holds (POST
	// /guard/confirm?source=NAME); nil leaves it out.
	Confirm func(ctx context.Context, source string) error
	// Reload reads the configuration file again and applies it (POST
	// /-/reload), as SIGHUP does; nil leaves it out. It returns what the
	// reload did, answered as JSON, or why it was refused: invalid says
	// that the configuration itself was (answered 400), otherwise the
	// bridge could not apply it (500).
	Reload func(ctx context.Context) (result any, invalid bool, err error)
}

// Handler returns the admin HTTP handler:
//
//	/               the HTML status page
//	/healthz        200 while the process runs
//	/readyz         200 once every source synced, else 503 naming the pending ones; a
//	                state_dir that cannot be written, or whose state could not be read
//	                at startup, is a warning line, not unreadiness
//	/sources        JSON status of every source
//	/state          JSON status of persisting the state for warm starts (state_dir)
//	/metrics        Prometheus metrics
//	/clients        JSON status of the xDS clients
//	/guard/confirm  POST ?source=NAME: apply the removals the guard holds
//	/-/reload       POST: reload the configuration file, as SIGHUP does
//	/debug/pprof/   the Go profiler, with PProf; without it 404 naming admin.pprof
func Handler(opts Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if pending := opts.Pending(); len(pending) > 0 {
			http.Error(w, "not ready: waiting for the first sync of sources: "+strings.Join(pending, ", "),
				http.StatusServiceUnavailable)
		} else {
			fmt.Fprintln(w, "ready")
		}
		// A state directory that cannot be written costs only the next
		// restart its warm start, and one that could not be read cost
		// this start its own: the bridge serves as before, and taking
		// every replica whose disk filled out of service would turn
		// that into an outage. It is said here, for whoever reads the
		// answer (a bridge not ready for want of its warm start says
		// why), and in /state, the status page and the metrics.
		if opts.StateDir != nil {
			st := opts.StateDir()
			if st.LoadError != "" {
				fmt.Fprintf(w, "warning: started without the persisted state for warm starts, which could not be read: %s\n", st.LoadError)
			}
			if st.Failing {
				fmt.Fprintf(w, "warning: cannot persist the state for warm starts to %s since %s (%d failed writes): %s\n",
					st.Path, st.Since.UTC().Format(time.RFC3339), st.Failures, st.Error)
			}
		}
	})
	mux.HandleFunc("GET /sources", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, opts.Sources())
	})
	if opts.StateDir != nil {
		mux.HandleFunc("GET /state", func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, opts.StateDir())
		})
	}
	if opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	}
	if opts.Clients != nil {
		mux.HandleFunc("GET /clients", func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, opts.Clients())
		})
	}
	if opts.Confirm != nil {
		mux.HandleFunc("POST /guard/confirm", confirmHandler(opts.Confirm))
	}
	if opts.Reload != nil {
		mux.HandleFunc("POST /-/reload", reloadHandler(opts.Reload))
	}
	for pattern, h := range opts.Handlers {
		mux.Handle(pattern, h)
	}
	if opts.Status != nil {
		mux.HandleFunc("GET /{$}", statusPage(opts.Status))
	}
	if opts.PProf {
		// The profiler is registered on this mux only: importing
		// net/http/pprof also registers it on http.DefaultServeMux, which
		// nothing here serves. GET only: nothing here should change state.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	} else {
		// A bare 404 would leave the operator guessing whether the path is
		// wrong or the profiler off; the answer names the key.
		mux.HandleFunc("GET /debug/pprof/", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, pprofOff, http.StatusNotFound)
		})
	}
	return mux
}

// pprofOff is the answer under /debug/pprof/ while the profiler is off.
const pprofOff = "the profiler is off: set admin.pprof: true in the configuration to serve /debug/pprof/"

// WriteJSON answers v as indented JSON.
func WriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// An encoding error can only be a write error once the header is sent;
	// there is nobody left to tell.
	_ = enc.Encode(v)
}
