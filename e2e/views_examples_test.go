package e2e

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsbridge/xdsbridge/config"
	_ "github.com/xdsbridge/xdsbridge/plugins" // the file source of the example
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/xds"
	"github.com/xdsbridge/xdsbridge/xds/files"
)

// TestEnvoyBootstrapsWithoutADS checks the example bootstraps of Envoys
// that do not use ADS (per-type SotW and delta streams, REST polling)
// against what the bridge serves them: no ads_config (so the bridge must
// send them the api_config_source variant of its clusters), CDS on the API
// type their name promises, and a static control-plane cluster named like
// the bridge's default xds.config_cluster at the right listener.
func TestEnvoyBootstrapsWithoutADS(t *testing.T) {
	cases := []struct {
		file string
		api  corev3.ApiConfigSource_ApiType
		port uint32
	}{
		{"envoy/envoy-pertype.yaml", corev3.ApiConfigSource_GRPC, 18000},
		{"envoy/envoy-pertype-delta.yaml", corev3.ApiConfigSource_DELTA_GRPC, 18000},
		{"envoy/envoy-rest.yaml", corev3.ApiConfigSource_REST, 19000},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			b := bootstrap(t, filepath.Join("..", "examples", c.file))
			if b.GetDynamicResources().GetAdsConfig() != nil {
				t.Error("has ads_config")
			}
			acs := b.GetDynamicResources().GetCdsConfig().GetApiConfigSource()
			if acs.GetApiType() != c.api || acs.GetTransportApiVersion() != corev3.ApiVersion_V3 {
				t.Fatalf("cds_config = %v, want api_config_source %v V3", b.GetDynamicResources().GetCdsConfig(), c.api)
			}
			var cluster string
			if c.api == corev3.ApiConfigSource_REST {
				cluster = acs.GetClusterNames()[0]
			} else {
				cluster = acs.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()
			}
			if cluster != xds.DefaultConfigCluster {
				t.Errorf("control-plane cluster %q, but the bridge's clusters name %q", cluster, xds.DefaultConfigCluster)
			}
			if host, port := controlPlane(t, b, cluster); host != "127.0.0.1" || port != c.port {
				t.Errorf("control plane at %s:%d, want 127.0.0.1:%d", host, port, c.port)
			}
		})
	}
}

// TestEnvoyFilesBootstrap checks the watched-files bootstrap reads the
// cds.json that examples/views/bridge.yaml writes, watching its directory.
func TestEnvoyFilesBootstrap(t *testing.T) {
	b := bootstrap(t, filepath.Join("..", "examples", "envoy", "envoy-files.yaml"))
	if b.GetDynamicResources().GetAdsConfig() != nil {
		t.Error("has ads_config")
	}
	pcs := b.GetDynamicResources().GetCdsConfig().GetPathConfigSource()
	cfg, err := config.Load(filepath.Join("..", "examples", "views", "bridge.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Outputs) != 1 || !cfg.Outputs[0].CDS() || !cfg.XDS.REST.Enabled {
		t.Fatalf("examples/views/bridge.yaml: outputs %+v, rest %+v", cfg.Outputs, cfg.XDS.REST)
	}
	dir := cfg.Outputs[0].EnvoyDir
	if pcs.GetPath() != filepath.Join(dir, files.CDSFile) || pcs.GetWatchedDirectory().GetPath() != dir {
		t.Errorf("cds_config = %v, want path %s watched in %s", pcs, filepath.Join(dir, files.CDSFile), dir)
	}
}

// TestViewsExample runs examples/views/bridge.yaml (on free ports, writing
// into a temporary directory instead of /tmp/xdsbridge/xds) and reads what
// the two Envoy bootstraps it serves would read: envoy-rest.yaml's REST
// poll gets the quickstart's clusters with REST EDS sources naming the
// bootstrap's control-plane cluster, and envoy-files.yaml's cds.json names
// EDS files that exist.
func TestViewsExample(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	xdsAddr, adminAddr := freeport.Addr(t), freeport.Addr(t)
	cfg := rewriteInto(t, dir, filepath.Join(examples, "views", "bridge.yaml"), "127.0.0.1:18000", xdsAddr,
		"127.0.0.1:19000", adminAddr, "/tmp/xdsbridge/xds", out, "../quickstart/services.yaml", quickstartServices(t))
	start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)

	rest := bootstrap(t, filepath.Join(examples, "envoy", "envoy-rest.yaml"))
	req := fmt.Sprintf(`{"node": {"id": %q, "cluster": %q}}`, rest.GetNode().GetId(), rest.GetNode().GetCluster())
	resp, err := http.Post("http://"+adminAddr+"/v3/discovery:clusters", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("REST poll: %d %v\n%s", resp.StatusCode, err, body)
	}
	var polled discoveryv3.DiscoveryResponse
	if err := protojson.Unmarshal(body, &polled); err != nil {
		t.Fatal(err)
	}
	for name, cl := range clustersOf(t, &polled) {
		acs := cl.GetEdsClusterConfig().GetEdsConfig().GetApiConfigSource()
		if acs.GetApiType() != corev3.ApiConfigSource_REST || !slices.Equal(acs.GetClusterNames(), []string{xds.DefaultConfigCluster}) {
			t.Errorf("REST-polled cluster %s: eds_config %v, want REST from %s", name, cl.GetEdsClusterConfig().GetEdsConfig(), xds.DefaultConfigCluster)
		}
	}

	var written discoveryv3.DiscoveryResponse
	bridgetest.Eventually(t, patience, "cds.json", func() bool {
		b, err := os.ReadFile(filepath.Join(out, files.CDSFile))
		return err == nil && protojson.Unmarshal(b, &written) == nil
	})
	for name, cl := range clustersOf(t, &written) {
		p := cl.GetEdsClusterConfig().GetEdsConfig().GetPathConfigSource().GetPath()
		if _, err := os.Stat(p); err != nil || !strings.HasPrefix(p, out) {
			t.Errorf("cluster %s in cds.json reads its endpoints from %q: %v", name, p, err)
		}
	}
}

// clustersOf decodes a DiscoveryResponse's clusters by name and checks
// they are the quickstart's three.
func clustersOf(t *testing.T, r *discoveryv3.DiscoveryResponse) map[string]*clusterv3.Cluster {
	t.Helper()
	out := map[string]*clusterv3.Cluster{}
	for _, a := range r.GetResources() {
		var cl clusterv3.Cluster
		if err := a.UnmarshalTo(&cl); err != nil {
			t.Fatal(err)
		}
		out[cl.GetName()] = &cl
	}
	if got := slices.Sorted(maps.Keys(out)); !slices.Equal(got, []string{"api", "payments", "web"}) {
		t.Fatalf("clusters %v, want the quickstart's", got)
	}
	return out
}
