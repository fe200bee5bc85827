package statuspage

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/bench/report"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// Config measures the admin status page of a bridge binary at a
// size: Services services in a file source, some of them without
// endpoints, without healthy ones or failing to translate; a second source
// gone stale; Clients xDS clients, some NACKing every assignment. Each path
// is fetched Runs times over HTTP (size, time to the last byte) and loaded
// Runs times in headless Chromium (after one load that is not counted).
type Config struct {
	BridgeBin string
	Chromium  string
	Services  int
	Clients   int
	Paths     []string
	Runs      int
	Timeout   time.Duration // bound of each wait (the bridge ready, the clients served, a page load)
	OutDir    string
	Label     string // names the bridge's log and the rows
	Logger    *slog.Logger
}

// Result is one path's figures; the slices hold one value a run.
type Result struct {
	Label, Path       string
	Services, Clients int
	Bytes             int             // the answer's body over HTTP (the first fetch)
	Fetch             []time.Duration // GET until the last byte, Go client
	Loads             []PageLoad
}

// Every nth service of the generated file is one of the problems the page
// shows first.
const (
	everyUnhealthy = 100  // all endpoints unhealthy
	everyEmpty     = 250  // no endpoints at all
	everyBroken    = 1000 // weights summing past uint32: cannot be translated, shows as a service error
	everyNACKing   = 50   // of the clients: NACKs every assignment
)

// statusPageServices writes the services file of cfg.
func statusPageServices(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, "services:")
	for i := range n {
		fmt.Fprintf(w, "  - name: svc-%05d\n", i)
		switch {
		case i%everyBroken == 3:
			fmt.Fprintf(w, "    endpoints:\n      - {address: 10.1.%d.%d, port: 8080, weight: 4294967295}\n"+
				"      - {address: 10.2.%d.%d, port: 8080, weight: 4294967295}\n", i>>8&0xff, i&0xff, i>>8&0xff, i&0xff)
		case i%everyEmpty == 2:
			fmt.Fprintln(w, "    endpoints: []")
		default:
			health := "healthy"
			if i%everyUnhealthy == 1 {
				health = "unhealthy"
			}
			fmt.Fprintln(w, "    endpoints:")
			for j := range 3 {
				fmt.Fprintf(w, "      - {address: 10.%d.%d.%d, port: %d, health: %s, locality: {zone: zone-%c}}\n",
					j+1, i>>8&0xff, i&0xff, 8080+j, health, 'a'+j)
			}
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

// Run runs cfg and returns one result per path.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	dir, err := os.MkdirTemp("", "xdsload-status-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	services, other := filepath.Join(dir, "services.yaml"), filepath.Join(dir, "other.yaml")
	if err := statusPageServices(services, cfg.Services); err != nil {
		return nil, err
	}
	if err := os.WriteFile(other, []byte("services: [{name: other, endpoints: [{address: 10.9.9.9, port: 80}]}]\n"), 0o600); err != nil {
		return nil, err
	}
	ports, err := freeport.Take(2)
	if err != nil {
		return nil, err
	}
	xdsAddr, adminAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	conf := filepath.Join(dir, "bridge.yaml")
	yaml := fmt.Sprintf("xds: {listen: %q}\nadmin: {listen: %q}\nlog: {level: warn}\nsources:\n"+
		"  - {name: registry, type: file, path: %q, startup: {required: true}}\n"+
		"  - {name: other, type: file, path: %q, poll_interval: 200ms, startup: {required: true}}\n",
		xdsAddr, adminAddr, services, other)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	bridge, err := proc.Start(filepath.Join(cfg.OutDir, "status-page."+cfg.Label+".bridge.log"), cfg.BridgeBin, "run", "--config", conf)
	if err != nil {
		return nil, err
	}
	defer proc.Stop(bridge)
	if err := proc.Poll(ctx, cfg.Timeout, proc.BridgeReady(adminAddr)); err != nil {
		return nil, fmt.Errorf("waiting for the bridge to be ready: %w", err)
	}
	clients, err := statusPageClients(ctx, cfg, xdsAddr)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	// The second source goes stale: its file breaks, the last good state stays.
	if err := os.WriteFile(other, []byte("services: [{name: other, endpoints: [{address: nowhere}]}]\n"), 0o600); err != nil {
		return nil, err
	}
	if err := proc.Poll(ctx, cfg.Timeout, adminBodyHas(adminAddr, "/sources", `"stale": true`)); err != nil {
		return nil, fmt.Errorf("waiting for the second source to go stale: %w", err)
	}
	cfg.Logger.Info("status page: bridge, clients and sources in place", "label", cfg.Label, "services", cfg.Services, "clients", cfg.Clients)

	var out []Result
	for _, path := range cfg.Paths {
		r := Result{Label: cfg.Label, Path: path, Services: cfg.Services, Clients: cfg.Clients}
		for i := range cfg.Runs {
			start := time.Now()
			body, err := httpGet(ctx, "http://"+adminAddr+path)
			if err != nil {
				return out, err
			}
			r.Fetch = append(r.Fetch, time.Since(start))
			if i == 0 {
				r.Bytes = len(body)
			}
		}
		loads, err := loadPage(ctx, cfg, "http://"+adminAddr+path)
		if err != nil {
			return out, err
		}
		r.Loads = loads
		cfg.Logger.Info("status page measured", "label", cfg.Label, "path", path, "bytes", r.Bytes,
			"fetch_p50", report.Pct(r.Fetch, 50), "load_p50_ms", median(loads, func(l PageLoad) float64 { return l.Load }))
		out = append(out, r)
	}
	return out, nil
}

// statusPageClients connects cfg.Clients clients, alternately delta and
// SotW ADS, each subscribed to three services; every everyNACKing-th
// rejects every assignment. It returns once each has had an answer for
// every type.
func statusPageClients(ctx context.Context, cfg Config, addr string) ([]*envoysim.Client, error) {
	out := make([]*envoysim.Client, cfg.Clients)
	var served atomic.Int64
	done := make([]atomic.Bool, cfg.Clients)
	errs := make([]error, cfg.Clients)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		wg.Go(func() {
			opts := envoysim.Options{
				Addr: addr, Node: fmt.Sprintf("envoy-%04d", i), Cluster: fmt.Sprintf("fleet-%d", i%10), Delta: i%2 == 0, Light: true,
				Clusters: []string{fmt.Sprintf("svc-%05d", i%cfg.Services), fmt.Sprintf("svc-%05d", (i*7+1)%cfg.Services), "other"},
				OnResponse: func(_ *envoysim.Client, r envoysim.Received) {
					if r.TypeURL == envoysim.EndpointType && done[i].CompareAndSwap(false, true) {
						served.Add(1)
					}
				},
				DialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.WaitForReady(true))},
			}
			if i%everyNACKing == 0 {
				opts.Reject = func(typeURL string, _ []*anypb.Any) error {
					if typeURL == envoysim.EndpointType {
						return errors.New("endpoint weight out of range")
					}
					return nil
				}
			}
			out[i], errs[i] = envoysim.Start(ctx, opts)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("starting the clients: %w", err)
	}
	out = slices.DeleteFunc(out, func(c *envoysim.Client) bool { return c == nil })
	err := proc.Poll(ctx, cfg.Timeout, func() bool { return served.Load() == int64(cfg.Clients) })
	if err != nil {
		return out, fmt.Errorf("%d of %d clients had their assignments: %w", served.Load(), cfg.Clients, err)
	}
	return out, nil
}

// loadPage loads url in one browser cfg.Runs+1 times and returns the
// figures of all but the first load, which pays for the browser's start.
func loadPage(ctx context.Context, cfg Config, url string) ([]PageLoad, error) {
	profile, err := os.MkdirTemp("", "xdsload-chromium-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(profile)
	b, err := startBrowser(cfg.Chromium, profile)
	if err != nil {
		return nil, err
	}
	defer b.close()
	var out []PageLoad
	for i := range cfg.Runs + 1 {
		lctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		pl, err := b.load(lctx, url)
		cancel()
		if err != nil {
			return out, fmt.Errorf("loading %s in chromium: %w", url, err)
		}
		if i > 0 {
			out = append(out, pl)
		}
	}
	return out, nil
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}

// adminBodyHas reports whether the admin API's answer at path contains s.
func adminBodyHas(adminAddr, path, s string) func() bool {
	return func() bool {
		body, err := httpGet(context.Background(), "http://"+adminAddr+path)
		return err == nil && strings.Contains(string(body), s)
	}
}

func median[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	slices.Sort(vs)
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)/2]
}

// CSV writes one row per page load, every figure in base units
// (bytes, ns; the browser's timing in ms as it reports them).
func CSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"label", "path", "services", "clients", "http_bytes", "run", "fetch_ns",
		"first_byte_ms", "last_byte_ms", "dom_content_loaded_ms", "load_ms",
		"layout_ns", "recalc_style_ns", "nodes"}); err != nil {
		return err
	}
	for _, r := range results {
		for i, l := range r.Loads {
			var fetch time.Duration
			if i < len(r.Fetch) {
				fetch = r.Fetch[i]
			}
			f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
			if err := cw.Write([]string{r.Label, r.Path, strconv.Itoa(r.Services), strconv.Itoa(r.Clients),
				strconv.Itoa(r.Bytes), strconv.Itoa(i + 1), strconv.FormatInt(int64(fetch), 10),
				f(l.FirstByte), f(l.LastByte), f(l.DOMContentLoaded), f(l.Load),
				strconv.FormatInt(int64(l.Layout), 10), strconv.FormatInt(int64(l.RecalcStyle), 10), strconv.Itoa(l.Nodes)}); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// Markdown is a table of the medians, one row per path.
func Markdown(results []Result) string {
	var b strings.Builder
	b.WriteString("| bridge | path | services | clients | page bytes | GET (Go) | first byte | DOMContentLoaded | load | layout + style | DOM nodes |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		ms := func(f func(PageLoad) float64) string { return fmt.Sprintf("%.0f ms", median(r.Loads, f)) }
		fmt.Fprintf(&b, "| %s | `%s` | %d | %d | %d | %s | %s | %s | %s | %s | %.0f |\n",
			r.Label, r.Path, r.Services, r.Clients, r.Bytes, report.Pct(r.Fetch, 50).Round(100*time.Microsecond),
			ms(func(l PageLoad) float64 { return l.FirstByte }), ms(func(l PageLoad) float64 { return l.DOMContentLoaded }),
			ms(func(l PageLoad) float64 { return l.Load }),
			time.Duration(median(r.Loads, func(l PageLoad) float64 { return float64(l.Layout + l.RecalcStyle) })).Round(100*time.Microsecond),
			median(r.Loads, func(l PageLoad) float64 { return float64(l.Nodes) }))
	}
	return b.String()
}
