package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/tlstest"
)

// The variants: clusters and assignments only, and the whole edge
// configuration.
const (
	variantCDSEDS = "cds-eds"
	variantEdge   = "edge"
)

// The names of the edge configuration, as the clients see them.
const (
	routeConfig = "edge"
	listener    = "edge_https"
	secretName  = "edge_cert"
	nodeCluster = "edge"
)

// edgeSections are the sections the edge variant adds to the bridge's
// configuration: a virtual host per service, an HTTPS listener using it,
// the listener's certificate from the files cert.pem and cert-key.pem
// (granted to the fleet's scope).
const edgeSections = `scopes:
  rules:
    - name: edge
      node: {cluster: edge}
routes:
  - config: edge
    hosts: ["{service}.example.com"]
listeners:
  - name: edge_https
    port: 8443
    http: {route_config: edge}
    tls: {certificates: [edge_cert]}
    scopes: [edge]
secrets:
  - name: edge_cert
    certificate_file: cert.pem
    private_key_file: cert-key.pem
    grant: [edge]
`

// bridge is one bridge process serving a services file in dir.
type bridge struct {
	cmd        *exec.Cmd
	xds, admin string
	dir, file  string
	ca         *tlstest.CA
	spec       workload.Spec
	services   []sources.Service // as written, edited in place
}

// startBridge writes the services and the configuration of variant to dir
// and starts bin on them; it returns once the admin API answers.
func startBridge(ctx context.Context, bin, dir, variant, logPath string, spec workload.Spec, pprof bool) (*bridge, error) {
	ports, err := freeport.Take(2)
	if err != nil {
		return nil, err
	}
	b := &bridge{xds: "127.0.0.1:" + strconv.Itoa(ports[0]), admin: "127.0.0.1:" + strconv.Itoa(ports[1]),
		dir: dir, file: filepath.Join(dir, "services.yaml"), spec: spec}
	for i := range spec.Services {
		b.services = append(b.services, spec.Service(i, 0))
	}
	if err := b.writeServices(); err != nil {
		return nil, err
	}
	// The poll is an hour so that a poll's re-read (the fallback for a
	// missed watch event) does not land in a change's window; the watch
	// sees every rename. The source is required so that nothing is served
	// before the file is read. The keepalive timeout, which is also each
	// connection's TCP_USER_TIMEOUT, is two minutes: the load generator
	// shares the bridge's CPUs, and on a loaded machine its thousand
	// clients cannot always read their cold start within the default ten
	// seconds, so the kernel would drop them. Everything else is the
	// default.
	conf := fmt.Sprintf("xds: {listen: %q, keepalive: {timeout: 2m}}\nadmin: {listen: %q, pprof: %t}\nlog: {level: warn}\nsources:\n"+
		"  - {name: file, type: file, path: services.yaml, poll_interval: 1h, startup: {required: true}}\n", b.xds, b.admin, pprof)
	if variant == variantEdge {
		if b.ca, err = tlstest.WriteCA(dir, "bench"); err != nil {
			return nil, err
		}
		if err := b.rotate(); err != nil {
			return nil, err
		}
		conf += edgeSections
	}
	if err := os.WriteFile(filepath.Join(dir, "bridge.yaml"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	b.cmd = exec.Command(bin, "run", "--config", filepath.Join(dir, "bridge.yaml"))
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	childproc.TieInOwnGroup(b.cmd)
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	if err := poll(ctx, 30*time.Second, 50*time.Millisecond, b.up); err != nil {
		b.stop()
		return nil, fmt.Errorf("waiting for the bridge's admin API: %w", err)
	}
	return b, nil
}

// up reports whether the admin API answers (it listens before the first
// sync; /readyz would not).
func (b *bridge) up() bool {
	resp, err := http.Get("http://" + b.admin + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// liveHeap is the bridge's go_gc_heap_live_bytes (0 if unreadable).
func (b *bridge) liveHeap() int64 {
	resp, err := http.Get("http://" + b.admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_gc_heap_live_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int64(f)
		}
	}
	return 0
}

// saveHeap saves the bridge's heap profile (after a collection) to path.
func (b *bridge) saveHeap(path string) error {
	resp, err := http.Get("http://" + b.admin + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, resp.Body)
	return errors.Join(err, out.Close())
}

// writeServices writes the services file as a tool should: a new file
// renamed over the old.
func (b *bridge) writeServices() error {
	tmp := b.file + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	fmt.Fprintln(w, "services:")
	for _, s := range b.services {
		fmt.Fprintf(w, "  - name: %s\n    endpoints:\n", s.Name)
		for _, e := range s.Endpoints {
			md := ""
			if t := e.Metadata[sources.MetaTags]; t != "" {
				md = fmt.Sprintf(", metadata: {tags: %q}", t)
			}
			fmt.Fprintf(w, "      - {address: %s, port: %d, weight: %d, locality: {region: %s, zone: %s}%s}\n",
				e.Address, e.Port, e.Weight, e.Locality.Region, e.Locality.Zone, md)
		}
	}
	if err := errors.Join(w.Flush(), out.Close()); err != nil {
		return fmt.Errorf("writing the services file: %w", err)
	}
	return os.Rename(tmp, b.file)
}

// editEndpoint applies change k of the workload (one endpoint's weight).
func (b *bridge) editEndpoint(k int) error {
	i := b.spec.Target(k)
	s := b.spec.Service(i, k)
	s.Endpoints[0].Metadata = b.services[i].Endpoints[0].Metadata
	b.services[i] = s
	return b.writeServices()
}

// editRoute sets the route tag urlprefix-/rK on a service's first
// endpoint, which claims that path on every host for the service: the
// route configuration changes, and no cluster or assignment does.
func (b *bridge) editRoute(k int) error {
	i := b.spec.Target(k + 1_000_003)
	b.services[i].Endpoints[0].Metadata = map[string]string{sources.MetaTags: fmt.Sprintf("urlprefix-/r%d", k)}
	return b.writeServices()
}

// rotate writes a new certificate and key over cert.pem and cert-key.pem.
func (b *bridge) rotate() error {
	_, err := b.ca.Write(b.dir, "cert", "edge.example.com")
	return err
}

func (b *bridge) pid() int { return b.cmd.Process.Pid }

func (b *bridge) stop() {
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

// poll calls ok every interval until it reports true, limit passes or ctx
// ends.
func poll(ctx context.Context, limit, interval time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	t := time.NewTicker(interval)
	defer t.Stop()
	for !ok() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// loadAvg is the 1-minute load average (0 where unavailable).
func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}
