package files

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/test/xdstest"
	"github.com/xdsbridge/xdsbridge/xds"
)

func service(name string, port uint32) []xds.Resource {
	c, a := xdstest.Service(name, port, 0)
	return []xds.Resource{c, a}
}

// read decodes a file as Envoy's filesystem subscription does: a whole
// DiscoveryResponse in JSON.
func read(t *testing.T, path string) *discoveryv3.DiscoveryResponse {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r discoveryv3.DiscoveryResponse
	if err := protojson.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return &r
}

// recorder collects the writer's completed steps.
type recorder struct {
	mu  sync.Mutex
	ops []string
}

func (r *recorder) record(op, name string) {
	r.mu.Lock()
	r.ops = append(r.ops, op+" "+name)
	r.mu.Unlock()
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops = nil
	return ops
}

func newWriter(t *testing.T, s *xds.Server, dir string) (*Writer, *recorder) {
	t.Helper()
	w, err := New(Options{Server: s, Dir: dir, EnvoyDir: "/etc/envoy/xds", CDS: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	w.written = rec.record
	return w, rec
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	s := xds.NewServer(xds.Options{})
	w, rec := newWriter(t, s, dir)
	if err := w.Sync(); err != nil || len(rec.take()) != 0 {
		t.Fatal("wrote before readiness")
	}

	s.Apply(append(service("a", 1), service("b/x", 2)...), nil)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if ops := rec.take(); !slices.Equal(ops, []string{"write a.json", "write b%2Fx.json", "write cds.json"}) {
		t.Fatalf("first sync: %v", ops)
	}
	cds := read(t, filepath.Join(dir, CDSFile))
	if cds.TypeUrl != xds.ClusterType || len(cds.Resources) != 2 {
		t.Fatalf("cds.json: %v", cds)
	}
	items, _ := s.Select(xds.ClusterType, nil, w.view)
	if cds.VersionInfo != xds.VersionOf(items) {
		t.Fatal("cds.json version is not the clusters' version")
	}
	for i, want := range []string{"/etc/envoy/xds/eds/a.json", "/etc/envoy/xds/eds/b%2Fx.json"} {
		var c clusterv3.Cluster
		if err := cds.Resources[i].UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if err := c.ValidateAll(); err != nil {
			t.Fatal(err)
		}
		cs := c.GetEdsClusterConfig().GetEdsConfig()
		if cs.GetPathConfigSource().GetPath() != want || cs.GetResourceApiVersion() != corev3.ApiVersion_V3 {
			t.Fatalf("cluster %s: eds_config %v, want path %s", c.Name, cs, want)
		}
	}
	eds := read(t, filepath.Join(dir, EDSDir, "b%2Fx.json"))
	var cla endpointv3.ClusterLoadAssignment
	if len(eds.Resources) != 1 || eds.Resources[0].UnmarshalTo(&cla) != nil || !proto.Equal(&cla, xdstest.Assignment("b/x", 2).Message) {
		t.Fatalf("eds file: %v", eds)
	}
	delta, _ := s.Select(xds.EndpointType, []string{"b/x"}, xds.View{})
	if eds.VersionInfo != delta[0].Version {
		t.Fatalf("eds version %q, want the resource's %q", eds.VersionInfo, delta[0].Version)
	}

	// An endpoint change rewrites its file only.
	s.Apply([]xds.Resource{xdstest.Assignment("a", 3)}, nil)
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if ops := rec.take(); !slices.Equal(ops, []string{"write a.json"}) {
		t.Fatalf("endpoint change: %v", ops)
	}

	// Make-before-break: the new cluster's EDS file, then cds.json, then
	// the removal of the old cluster's file.
	s.Apply(service("c", 4), []xds.Key{{Type: xds.ClusterType, Name: "a"}, {Type: xds.EndpointType, Name: "a"}})
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if ops := rec.take(); !slices.Equal(ops, []string{"write c.json", "write cds.json", "remove a"}) {
		t.Fatalf("add and remove: %v", ops)
	}
	if _, err := os.Stat(filepath.Join(dir, EDSDir, "a.json")); !os.IsNotExist(err) {
		t.Fatalf("a.json still there: %v", err)
	}

	// A restart on the same directory rewrites nothing that is current.
	w2, rec2 := newWriter(t, s, dir)
	if err := w2.Sync(); err != nil {
		t.Fatal(err)
	}
	if ops := rec2.take(); len(ops) != 0 {
		t.Fatalf("restart rewrote %v", ops)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*", tmpPref+"*"))
	left2, _ := filepath.Glob(filepath.Join(dir, tmpPref+"*"))
	if len(left)+len(left2) != 0 {
		t.Fatalf("temporary files left: %v %v", left, left2)
	}
}

func TestBadDir(t *testing.T) {
	if _, err := New(Options{Server: xds.NewServer(xds.Options{}), Dir: filepath.Join(t.TempDir(), "new", "dir")}); err != nil {
		t.Fatalf("a missing directory is created: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{"a file": file, "under a file": filepath.Join(file, "x")}
	if os.Geteuid() != 0 { // root writes anywhere
		cases["read-only"] = ro
	}
	for name, d := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := New(Options{Server: xds.NewServer(xds.Options{}), Dir: d}); err == nil {
				t.Fatalf("New(%s) succeeded", d)
			}
		})
	}
}

// TestRunNeverPartial: a reader that keeps reading the files while Run
// rewrites them always decodes a whole response, and sees each change.
func TestRunNeverPartial(t *testing.T) {
	dir := t.TempDir()
	s := xds.NewServer(xds.Options{})
	w, _ := newWriter(t, s, dir)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-done }()
	go func() { defer close(done); _ = w.Run(ctx) }()

	var rs []xds.Resource
	for i := range 50 {
		rs = append(rs, service("svc-"+strconv.Itoa(i), uint32(i+1))...)
	}
	t0 := time.Now()
	s.Apply(rs, nil)
	cdsPath := filepath.Join(dir, CDSFile)
	edsPath := filepath.Join(dir, EDSDir, "svc-0.json")
	waitFile(t, edsPath, func(r *discoveryv3.DiscoveryResponse) bool { return len(r.Resources) == 1 })
	waitFile(t, cdsPath, func(r *discoveryv3.DiscoveryResponse) bool { return len(r.Resources) == 50 })
	t.Logf("first sync done after %v", time.Since(t0))

	var lat []time.Duration
	for i := range 10 {
		start := time.Now()
		port := uint32(1000 + i)
		s.Apply([]xds.Resource{xdstest.Assignment("svc-0", port)}, nil)
		waitFile(t, edsPath, func(r *discoveryv3.DiscoveryResponse) bool {
			var cla endpointv3.ClusterLoadAssignment
			return r.Resources[0].UnmarshalTo(&cla) == nil &&
				cla.Endpoints[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue() == port
		})
		lat = append(lat, time.Since(start))
		// A cluster change too, read whole each time.
		s.Apply([]xds.Resource{xdstest.Cluster("new-"+strconv.Itoa(i), 0)}, nil)
		waitFile(t, cdsPath, func(r *discoveryv3.DiscoveryResponse) bool { return len(r.Resources) == 51+i })
	}
	slices.Sort(lat)
	t.Logf("Apply -> EDS file in place: p50 %v, max %v (50 clusters)", lat[len(lat)/2], lat[len(lat)-1])
}

// TestRunPacesAFailingDisk: while writes fail, the writer retries after
// its backoff, however often the store changes meanwhile, and catches up
// once the directory is writable again.
func TestRunPacesAFailingDisk(t *testing.T) {
	dir := t.TempDir()
	s := xds.NewServer(xds.Options{})
	w, rec := newWriter(t, s, dir)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-done }()
	go func() { defer close(done); _ = w.Run(ctx) }()
	s.Apply(service("web", 1), nil)
	edsPath := filepath.Join(dir, EDSDir, "web.json")
	waitFile(t, edsPath, func(*discoveryv3.DiscoveryResponse) bool { return true })

	// The EDS directory turns into a file: every write into it fails,
	// root's included.
	edsDir := filepath.Join(dir, EDSDir)
	if err := os.RemoveAll(edsDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(edsDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec.take()
	start := time.Now()
	for i := range 200 {
		s.Apply([]xds.Resource{xdstest.Assignment("web", uint32(i+2))}, nil)
	}
	failures := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for _, op := range rec.ops {
			if op == "fail " {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(patience)
	for failures() < 2 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	// The first attempt at once, then one after each backoff step (1 s,
	// doubling), each at least half its step.
	n, d := failures(), time.Since(start)
	limit, spent := 1, 0*time.Second
	for step := time.Second; spent+step/2 <= d; step = min(2*step, 30*time.Second) {
		spent += step / 2
		limit++
	}
	if n < 2 || n > limit {
		t.Fatalf("%d failed syncs in %v after 200 changes, want 2..%d", n, d, limit)
	}

	if err := os.Remove(edsDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(edsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFile(t, edsPath, func(r *discoveryv3.DiscoveryResponse) bool {
		var cla endpointv3.ClusterLoadAssignment
		return r.Resources[0].UnmarshalTo(&cla) == nil &&
			cla.Endpoints[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue() == 201
	})
}

// patience bounds every wait of these tests: a failure detector, not a
// measurement, that a loaded machine must never reach.
const patience = 30 * time.Second

// waitFile polls path until it decodes and ok holds; any read that does not
// decode (a partial file) fails the test.
func waitFile(t *testing.T, path string, ok func(*discoveryv3.DiscoveryResponse) bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err == nil {
			var r discoveryv3.DiscoveryResponse
			if err := protojson.Unmarshal(b, &r); err != nil {
				t.Fatalf("partial or bad file %s: %v", path, err)
			}
			if ok(&r) {
				return
			}
		} else if !os.IsNotExist(err) {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s: not in the expected state within %v", path, patience)
}

func TestFileName(t *testing.T) {
	for _, n := range []string{"web", "a.b-c_d", ".hidden", "../etc/passwd", "a/b", "100%", "ünï", "x y"} {
		f := FileName(n)
		if filepath.Base(f) != f || f[0] == '.' {
			t.Errorf("FileName(%q) = %q: not a plain visible name", n, f)
		}
		if got, ok := nameOf(f); !ok || got != n {
			t.Errorf("nameOf(FileName(%q)) = %q, %v", n, got, ok)
		}
	}
	if _, ok := nameOf("a%2f.json"); ok {
		t.Error("a lower-case escape is not one FileName writes")
	}
}

// BenchmarkSync measures a first sync of 1,000 services into an empty
// directory (1,001 files) and a sync after one endpoint change (one file).
func BenchmarkSync(b *testing.B) {
	var rs []xds.Resource
	for i := range 1000 {
		rs = append(rs, service("svc-"+strconv.Itoa(i), uint32(i+1))...)
	}
	b.Run("first-1000", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			s := xds.NewServer(xds.Options{})
			s.Apply(rs, nil)
			w, err := New(Options{Server: s, Dir: b.TempDir(), CDS: true})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := w.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-change-of-1000", func(b *testing.B) {
		s := xds.NewServer(xds.Options{})
		s.Apply(rs, nil)
		w, err := New(Options{Server: s, Dir: b.TempDir(), CDS: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			s.Apply([]xds.Resource{xdstest.Assignment("svc-7", uint32(5000+i%2))}, nil)
			if err := w.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
