package e2e

import (
	"path/filepath"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsbridge/xdsbridge/config"
	_ "github.com/xdsbridge/xdsbridge/plugins" // the file source of the example
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
