package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// bridge is a bridge process serving a services file, with one delta ADS
// client (wildcard CDS, EDS for every cluster, as Envoy) that holds what
// it serves.
type bridge struct {
	cmd    *exec.Cmd
	admin  string // host:port of the admin API
	file   string // the services file it reads
	client *envoysim.Client
}

// startBridge writes n services (the base ones and n-base more) to a new
// file under dir, starts bin on it
// with default settings but for the limits a client of 100,000 clusters
// needs, the file source's size limit and the profiler (the forced
// collections), and waits until the client holds all n.
func startBridge(ctx context.Context, bin, dir, log string, n int, patience time.Duration) (*bridge, error) {
	ports, err := freeport.Take(2)
	if err != nil {
		return nil, err
	}
	b := &bridge{admin: "127.0.0.1:" + strconv.Itoa(ports[1]), file: filepath.Join(dir, "services.json")}
	if err := writeServices(b.file, 0, n-base); err != nil {
		return nil, err
	}
	xdsAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	conf := filepath.Join(dir, "bridge.yaml")
	yaml := fmt.Sprintf("xds: {listen: %q, limits: {names_per_request: 250000, names_per_subscription: 250000}}\n"+
		"admin: {listen: %q, pprof: true}\nlog: {level: warn}\nsources:\n"+
		"  - {name: file, type: file, path: %q, poll_interval: 1h, max_bytes: %d, startup: {required: true}}\n",
		xdsAddr, b.admin, b.file, 1<<30)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	b.cmd = exec.Command(bin, "run", "--config", conf)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	childproc.TieInOwnGroup(b.cmd)
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	if err := poll(ctx, 30*time.Second, func() bool { _, err := b.get("/healthz"); return err == nil }); err != nil {
		b.stop()
		return nil, fmt.Errorf("waiting for the bridge's admin API: %w", err)
	}
	b.client, err = envoysim.Start(ctx, envoysim.Options{Addr: xdsAddr, Delta: true, Light: true, Node: "memory"})
	if err != nil {
		b.stop()
		return nil, err
	}
	if err := b.holds(ctx, n, patience, nil); err != nil {
		b.stop()
		return nil, fmt.Errorf("first state: %w", err)
	}
	return b, nil
}

// serve writes services from..from+n-1 plus the base ones and waits until
// the client holds exactly them. A mass removal starts the removal guard's
// hold (30 s by default); the operator's confirmation applies it at once,
// as an operator who made the change would.
func (b *bridge) serve(ctx context.Context, from, n int, patience time.Duration) error {
	if err := writeServices(b.file, from, n); err != nil {
		return err
	}
	return b.holds(ctx, base+n, patience, func() { b.post("/guard/confirm?source=file") })
}

// post sends a POST to the admin API, ignoring the answer.
func (b *bridge) post(path string) {
	resp, err := http.Post("http://"+b.admin+path, "", nil)
	if err == nil {
		resp.Body.Close()
	}
}

// holds waits until the client holds n clusters and n assignments, calling
// each (if set) every second meanwhile.
func (b *bridge) holds(ctx context.Context, n int, patience time.Duration, each func()) error {
	last := time.Now()
	err := poll(ctx, patience, func() bool {
		if each != nil && time.Since(last) > time.Second {
			each()
			last = time.Now()
		}
		return b.client.Len(envoysim.ClusterType) == n && b.client.Len(envoysim.EndpointType) == n
	})
	if err == nil {
		// The client drops an assignment with its cluster, before the
		// assignment's removal reaches it: the bridge is done once it
		// holds n of each type for the client, owes it nothing and has
		// its ACKs.
		err = pollEvery(ctx, 100*time.Millisecond, patience, func() bool { return b.done(n) })
	}
	if err != nil {
		held := slices.Sorted(maps.Keys(b.client.Versions()[envoysim.ClusterType]))
		return fmt.Errorf("the client holds %d clusters (%s) and %d assignments, want %d: %w",
			len(held), strings.Join(held[:min(len(held), 20)], " "), b.client.Len(envoysim.EndpointType), n, err)
	}
	return b.client.Err()
}

// done reports whether the bridge's one client holds n resources of each
// type, is owed nothing and has ACKed every response (/clients).
func (b *bridge) done(n int) bool {
	body, err := b.get("/clients")
	if err != nil {
		return false
	}
	var clients []struct {
		Types []struct {
			Held, Pending int
			Sent          string `json:"sent_version"`
			Acked         string `json:"acked_version"`
		}
	}
	if json.Unmarshal(body, &clients) != nil || len(clients) != 1 || len(clients[0].Types) < 2 {
		return false
	}
	for _, t := range clients[0].Types {
		if t.Held != n || t.Pending != 0 || t.Sent != t.Acked {
			return false
		}
	}
	return true
}

func (b *bridge) stop() {
	if b.client != nil {
		b.client.Close()
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

func (b *bridge) get(path string) ([]byte, error) {
	resp, err := http.Get("http://" + b.admin + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, err
}

// liveHeap forces a collection in the bridge (the profiler's gc=1) and
// returns the heap it found live (go_gc_heap_live_bytes). The heap in use
// after the request would count the garbage of writing the profile, which
// grows with the profile's records over the process's life: it is the
// fallback for a bridge that does not export the live heap (an older
// one, to compare with).
func (b *bridge) liveHeap() (int64, error) {
	body, err := b.get("/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return 0, err
	}
	if v, err := b.metric("go_gc_heap_live_bytes"); err != nil || v > 0 {
		return int64(v), err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("neither go_gc_heap_live_bytes nor the heap profile's HeapAlloc")
}

// saveHeap writes a heap profile of the bridge, after a forced collection,
// to path.
func (b *bridge) saveHeap(path string) error {
	body, err := b.get("/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// saveMetrics writes the bridge's /metrics to path: the runtime's account
// of its memory beside the resident set.
func (b *bridge) saveMetrics(path string) error {
	body, err := b.get("/metrics")
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// metric reads one unlabelled sample of /metrics (0 if absent).
func (b *bridge) metric(name string) (float64, error) {
	body, err := b.get("/metrics")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, sc.Err()
}

// rss is the process's resident set, VmRSS of /proc/<pid>/status.
func (b *bridge) rss() int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// base is the number of services every state keeps.
const base = 6

// writeServices writes the services file as a tool should (a new file
// renamed over the old): the base services svc-0..svc-5 and n more,
// churn-<from>..churn-<from+n-1>, three endpoints each.
func writeServices(path string, from, n int) error {
	type endpoint struct {
		Address string `json:"address"`
		Port    int    `json:"port"`
	}
	type service struct {
		Name      string     `json:"name"`
		Endpoints []endpoint `json:"endpoints"`
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	_, _ = w.WriteString("{\"services\": [\n")
	enc := json.NewEncoder(w)
	for i := range base + n {
		name := "svc-" + strconv.Itoa(i)
		if i >= base {
			name = "churn-" + strconv.Itoa(from+i-base)
		}
		s := service{Name: name}
		for j := range 3 {
			s.Endpoints = append(s.Endpoints, endpoint{Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 8080 + j})
		}
		if i > 0 {
			_, _ = w.WriteString(",")
		}
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	_, _ = w.WriteString("]}\n")
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// poll checks cond every 50 ms until it holds or limit passes.
func poll(ctx context.Context, limit time.Duration, cond func() bool) error {
	return pollEvery(ctx, 50*time.Millisecond, limit, cond)
}

// pollEvery checks cond every interval until it holds or limit passes.
// The bridge's metrics are read no more than once a second: a scrape
// allocates, and scrapes every 50 ms would keep the bridge from ever
// being quiet enough to return memory.
func pollEvery(ctx context.Context, interval, limit time.Duration, cond func() bool) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("not within %s", limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
