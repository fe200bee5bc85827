package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/xds"
)

// TestEnvoyBootstraps checks the example Envoy bootstraps that use ADS
// parse strictly as v3 Bootstrap protos, pass Envoy's validation rules and
// use the ADS variant their name promises. Envoy itself is not available
// here.
func TestEnvoyBootstraps(t *testing.T) {
	cases := []struct {
		file string
		api  corev3.ApiConfigSource_ApiType
		host string
	}{
		{"envoy/envoy.yaml", corev3.ApiConfigSource_GRPC, "127.0.0.1"},
		{"envoy/envoy-delta.yaml", corev3.ApiConfigSource_DELTA_GRPC, "127.0.0.1"},
		{"edge/envoy.yaml", corev3.ApiConfigSource_GRPC, "127.0.0.1"},
		{"compose/envoy.yaml", corev3.ApiConfigSource_GRPC, "bridge"},
		{"migration/static-to-eds/envoy.yaml", corev3.ApiConfigSource_GRPC, "127.0.0.1"},
		{"migration/static-to-lds/envoy.yaml", corev3.ApiConfigSource_GRPC, "127.0.0.1"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			b := bootstrap(t, filepath.Join("..", "examples", c.file))
			ads := b.GetDynamicResources().GetAdsConfig()
			if ads.GetApiType() != c.api || ads.GetTransportApiVersion() != corev3.ApiVersion_V3 {
				t.Errorf("ads_config = %v %v, want %v V3", ads.GetApiType(), ads.GetTransportApiVersion(), c.api)
			}
			if b.GetDynamicResources().GetCdsConfig().GetAds() == nil {
				t.Error("cds_config does not use ADS")
			}
			cluster := ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()
			if host, port := controlPlane(t, b, cluster); host != c.host || port != 18000 {
				t.Errorf("control plane at %s:%d, want %s:18000", host, port, c.host)
			}
		})
	}
}

// TestExampleBootstrapsNameOneControlPlane checks that every Envoy
// bootstrap among the examples that talks to the bridge (over ADS,
// per-type streams or REST) calls the bridge's static cluster by the
// name of the bridge's default xds.config_cluster: the name the clusters
// served to Envoys without ADS point at, and so the one name that works
// in every variant. Those that hold gRPC streams to it give that cluster
// HTTP/2 keepalive.
func TestExampleBootstrapsNameOneControlPlane(t *testing.T) {
	var checked, streams int
	minPing := defaultMinPing(t)
	err := filepath.WalkDir(filepath.Join("..", "examples"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "envoy") || filepath.Ext(path) != ".yaml" {
			return err
		}
		b := bootstrap(t, path)
		dyn := b.GetDynamicResources()
		var names []string
		for _, acs := range []*corev3.ApiConfigSource{dyn.GetAdsConfig(), dyn.GetCdsConfig().GetApiConfigSource(), dyn.GetLdsConfig().GetApiConfigSource()} {
			names = append(names, acs.GetClusterNames()...)
			for _, g := range acs.GetGrpcServices() {
				names = append(names, g.GetEnvoyGrpc().GetClusterName())
			}
		}
		for _, n := range names {
			if n != xds.DefaultConfigCluster {
				t.Errorf("%s: the bridge's cluster is named %q, want %q (xds.config_cluster's default)", path, n, xds.DefaultConfigCluster)
			}
		}
		if len(names) > 0 {
			checked++
			controlPlane(t, b, names[0])
		}
		if dyn.GetAdsConfig() != nil || len(dyn.GetCdsConfig().GetApiConfigSource().GetGrpcServices()) > 0 {
			streams++
			checkKeepalive(t, path, b, names[0], minPing)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 7 || streams < 6 {
		t.Errorf("checked %d bootstraps that talk to the bridge, %d of them over gRPC streams; want the 7 of the examples, 6 over streams", checked, streams)
	}
}

// defaultMinPing is the bridge's default xds.keepalive.min_client_interval:
// a client that pings more often is sent a GOAWAY (too_many_pings).
func defaultMinPing(t *testing.T) time.Duration {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bridge.yaml")
	writeFile(t, path, "sources: [{name: s, type: file, path: services.yaml}]\n")
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.XDS.Keepalive.MinClientInterval
}

// checkKeepalive checks that the bootstrap's static cluster name, which
// carries gRPC streams to the bridge, has the HTTP/2 keepalive
// docs/deployment.md recommends, pinging no more often than the bridge
// allows (minPing).
func checkKeepalive(t *testing.T, path string, b *bootstrapv3.Bootstrap, name string, minPing time.Duration) {
	t.Helper()
	for _, cl := range b.GetStaticResources().GetClusters() {
		if cl.GetName() != name {
			continue
		}
		var opts httpv3.HttpProtocolOptions
		if err := cl.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&opts); err != nil {
			t.Errorf("%s: cluster %s has no HttpProtocolOptions: %v", path, name, err)
			return
		}
		ka := opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions().GetConnectionKeepalive()
		if ka.GetInterval().AsDuration() < minPing || ka.GetTimeout().AsDuration() <= 0 {
			t.Errorf("%s: cluster %s's HTTP/2 connection_keepalive is %v, want an interval of at least %v (the bridge's min_client_interval) and a timeout",
				path, name, ka, minPing)
		}
		return
	}
}

// controlPlane returns the address of the bootstrap's static cluster name.
func controlPlane(t *testing.T, b *bootstrapv3.Bootstrap, name string) (string, uint32) {
	t.Helper()
	for _, cl := range b.GetStaticResources().GetClusters() {
		if cl.GetName() == name {
			sa := cl.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			return sa.GetAddress(), sa.GetPortValue()
		}
	}
	t.Fatalf("no static cluster %q for the control plane", name)
	return "", 0
}

func TestGRPCBootstrap(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "examples", "grpc", "bootstrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		XDSServers []struct {
			ServerURI      string   `json:"server_uri"`
			ServerFeatures []string `json:"server_features"`
			ChannelCreds   []struct {
				Type string `json:"type"`
			} `json:"channel_creds"`
		} `json:"xds_servers"`
		Node struct {
			ID string `json:"id"`
		} `json:"node"`
	}
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.XDSServers) != 1 || b.XDSServers[0].ServerURI != "127.0.0.1:18000" ||
		len(b.XDSServers[0].ServerFeatures) != 1 || b.XDSServers[0].ServerFeatures[0] != "xds_v3" ||
		len(b.XDSServers[0].ChannelCreds) == 0 || b.Node.ID == "" {
		t.Errorf("bootstrap = %+v", b)
	}
}

// exampleRuns names, for every bridge configuration under examples/, the
// test that runs it as far as this machine allows beyond `bridge validate`
// (a dump against real registry servers, or the bridge as a process with
// its clients). TestExampleConfigsValidate fails for a configuration
// missing here, so a new example cannot go unexercised.
var exampleRuns = map[string]string{
	"quickstart/bridge.yaml":                 "TestQuickstart",
	"grpc/bridge.yaml":                       "TestGRPCExample",
	"views/bridge.yaml":                      "TestViewsExample",
	"consul/bridge.yaml":                     "TestConsulExample",
	"dns/bridge.yaml":                        "TestDNSExample",
	"compose/bridge.yaml":                    "TestComposeExample",
	"migration/static-to-eds/bridge.yaml":    "TestMigrationStaticToEDS",
	"migration/strict-dns/bridge.yaml":       "TestMigrationStrictDNS",
	"migration/consul-template/bridge.yaml":  "TestMigrationConsulTemplate",
	"migration/weighted-cutover/bridge.yaml": "TestMigrationWeightedCutover",
	"edge/bridge.yaml":                       "TestEdgeExample",
	"migration/static-to-lds/bridge.yaml":    "TestMigrationStaticToLDS",
}

// TestExampleConfigsValidate runs `bridge validate` on every example
// configuration, which must pass without a warning, and checks that each is
// run by a test of exampleRuns.
func TestExampleConfigsValidate(t *testing.T) {
	var found []string
	err := filepath.WalkDir(examples, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "bridge.yaml" {
			return err
		}
		rel, err := filepath.Rel(examples, path)
		found = append(found, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		code, out := runBinary(t, 30*time.Second, "validate", "--config", filepath.Join(examples, f))
		if code != 0 || !strings.Contains(out, "config OK") {
			t.Errorf("validate %s: exit %d, output %q", f, code, out)
		}
		// An example is what a user copies first: it validates without a
		// warning, which would be about a key it wrote.
		if strings.Contains(out, "warning:") {
			t.Errorf("validate %s warns:\n%s", f, out)
		}
		if exampleRuns[f] == "" {
			t.Errorf("%s: no test runs it (add one, and list it in exampleRuns)", f)
		}
	}
	for f := range exampleRuns {
		if !slices.Contains(found, f) {
			t.Errorf("exampleRuns lists %s, which does not exist", f)
		}
	}
}
