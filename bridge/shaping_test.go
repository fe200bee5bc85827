package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/config"
	_ "github.com/xdsbridge/xdsbridge/plugins"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/xds"
)

// shapedConfig is a bridge serving the file at services with one shaping
// rule (a gRPC service with least request, HTTP/2 upstreams, outlier
// detection and no panic mode) limited to clients.
func shapedConfig(services, clients string) string {
	return fmt.Sprintf(`
xds: {listen: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
holdoff: {min: 10ms, max: 50ms}
sources:
  - {name: static, type: file, path: %s}
transforms:
  - name: stage
    type: metadata
    set: [{tag: grpc, key: protocol, value: h2}]
clusters:
  - match: {tags: [grpc]}
    clients: %s
    cluster:
      lb_policy: LEAST_REQUEST
      typed_extension_protocol_options:
        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
          explicit_http_config: {http2_protocol_options: {}}
      outlier_detection: {consecutive_5xx: 5, interval: 10s, base_ejection_time: 30s}
      common_lb_config: {healthy_panic_threshold: {value: 0}}
`, services, clients)
}

// writeServices writes a file-source document with one service, greeter,
// tagged grpc, at the given ports on loopback.
func writeServices(t *testing.T, ports []uint32) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("services:\n  - name: greeter\n    endpoints:\n")
	for _, p := range ports {
		fmt.Fprintf(&b, "      - {address: 127.0.0.1, port: %d, metadata: {tags: grpc}}\n", p)
	}
	path := filepath.Join(t.TempDir(), "services.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// shaped reports whether c carries shapedConfig's rule.
func shaped(c *clusterv3.Cluster) bool {
	var po httpv3.HttpProtocolOptions
	a := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	return c.GetLbPolicy() == clusterv3.Cluster_LEAST_REQUEST &&
		c.GetOutlierDetection().GetConsecutive_5Xx().GetValue() == 5 &&
		c.GetCommonLbConfig().GetHealthyPanicThreshold() != nil &&
		c.GetCommonLbConfig().GetHealthyPanicThreshold().GetValue() == 0 &&
		a != nil && a.UnmarshalTo(&po) == nil && po.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := bridgetest.Get(url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

// configDump gets an Envoy-shaped config dump from url and unpacks it.
func configDump(t *testing.T, url string) (xds.Dump, bridge.DumpOptions) {
	t.Helper()
	code, body := bridgetest.Get(url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	var cd adminv3.ConfigDump
	if err := protojson.Unmarshal([]byte(body), &cd); err != nil {
		t.Fatalf("GET %s: not an envoy.admin.v3.ConfigDump: %v in %s", url, err, body)
	}
	d, opts, err := bridge.Unpack(&cd)
	if err != nil {
		t.Fatal(err)
	}
	return d, opts
}

// TestShapedClusterPerClientClass checks cluster shaping end to end: the
// rule reaches an Envoy-like client, the same rule limited to Envoy clients
// does not reach grpc-go, which still routes RPCs; the admin
// API explains the cluster and shows what each client holds.
func TestShapedClusterPerClientClass(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs, ports := grpcxdstest.Backends(t, 2)
	in := bridgetest.Start(t, shapedConfig(writeServices(t, ports), "envoy"))
	xdsAddr, admin := in.XDSAddr().String(), "http://"+in.AdminAddr().String()
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)

	envoy, err := envoysim.Start(ctx, envoysim.Options{Addr: xdsAddr, Node: "envoy-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer envoy.Close()
	if err := envoy.WaitFor(ctx, func(s envoysim.State) bool {
		return s.Clusters["greeter"] != nil && shaped(s.Clusters["greeter"]) && len(s.Assignments["greeter"].GetEndpoints()) > 0
	}); err != nil {
		t.Fatalf("the Envoy never held the shaped cluster: %v", err)
	}

	hits := grpcxdstest.Dial(t, xdsAddr, "grpc-1", "greeter").Hits(ctx, 20)
	if hits[addrs[0]]+hits[addrs[1]] != 20 {
		t.Errorf("grpc-go RPCs reached %v, want all 20 on %v", hits, addrs)
	}

	// bridge dump's path (Snapshot, ForClient) yields what the Envoy holds.
	cfgPath := filepath.Join(t.TempDir(), "bridge.yaml")
	if err := os.WriteFile(cfgPath, []byte(shapedConfig(writeServices(t, ports), "envoy")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := bridge.Snapshot(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d, err := bridge.ForNode(rs, bridge.Client("envoy-1", "", false), nil, xds.ClusterType)
	if err != nil {
		t.Fatal(err)
	}
	var dumpedCluster clusterv3.Cluster
	if len(d[xds.ClusterType]) != 1 || d[xds.ClusterType][0].Resource.UnmarshalTo(&dumpedCluster) != nil {
		t.Fatalf("dump: %v", d)
	}
	if held := envoy.State().Clusters["greeter"]; !proto.Equal(held, &dumpedCluster) {
		t.Errorf("bridge dump shows\n%v\nthe Envoy holds\n%v", &dumpedCluster, held)
	}

	dump, opts := configDump(t, admin+"/debug/config_dump?node=grpc-1")
	if clusters := dump[xds.ClusterType]; len(clusters) != 1 || strings.Contains(clusters[0].Resource.String(), "LEAST_REQUEST") {
		t.Errorf("grpc-go holds clusters %v; want greeter without the Envoy-only shaping", clusters)
	}
	if opts.Node.GetId() != "grpc-1" || opts.Versions[xds.ClusterType] == "" {
		t.Errorf("grpc-1's dump has node %v and versions %v; want its id and its ACKed CDS version", opts.Node, opts.Versions)
	}
	dump, _ = configDump(t, admin+"/debug/config_dump?node=envoy-1")
	if clusters := dump[xds.ClusterType]; len(clusters) != 1 || !strings.Contains(clusters[0].Resource.String(), "LEAST_REQUEST") ||
		clusters[0].Version != d[xds.ClusterType][0].Version {
		t.Errorf("the Envoy holds clusters %v; want greeter shaped, with the version bridge dump gives it (%s)", clusters, d[xds.ClusterType][0].Version)
	}
	// ?resource= flattens the dump as Envoy's admin does.
	if code, body := bridgetest.Get(admin + "/debug/config_dump?node=envoy-1&resource=dynamic_active_clusters"); code != http.StatusOK ||
		!strings.HasPrefix(body, "{\n  \"configs\": [\n    {\n      \"@type\": \"type.googleapis.com/envoy.admin.v3.ClustersConfigDump.DynamicCluster\",\n      \"version_info\": \"") {
		t.Errorf("config_dump?resource=dynamic_active_clusters = %d %.300s", code, body)
	}
	if code, _ := bridgetest.Get(admin + "/debug/config_dump?resource=nope"); code != http.StatusBadRequest {
		t.Errorf("config_dump?resource=nope = %d, want 400", code)
	}
	for _, c := range []struct {
		query  string
		shaped bool
	}{{"", true}, {"?grpc=1", false}} {
		all, _ := configDump(t, admin+"/debug/config_dump"+c.query)
		clusters := all[xds.ClusterType]
		if len(clusters) != 1 || len(all[xds.EndpointType]) != 1 || strings.Contains(clusters[0].Resource.String(), "LEAST_REQUEST") != c.shaped {
			t.Errorf("config_dump%s = %v; want greeter's cluster (shaped: %t) and endpoints", c.query, all, c.shaped)
		}
	}
	if code, _ := bridgetest.Get(admin + "/debug/config_dump?node=nobody"); code != http.StatusNotFound {
		t.Errorf("config_dump of an unknown node: %d, want 404", code)
	}

	var why bridge.Why
	getJSON(t, admin+"/debug/why?cluster=greeter", &why)
	if why.Source != "static" || fmt.Sprint(why.Shaping.Envoy, why.Shaping.GRPC) != "[0] []" || len(why.Endpoints) != 2 {
		t.Fatalf("why = %+v; want source static, rule 0 for Envoy only, two endpoints", why)
	}
	records := map[string]bool{}
	for i, e := range why.Endpoints {
		records[e.Record] = true
		if e.Source != "static" || fmt.Sprint(e.Transforms) != "[stage]" || e.Metadata["protocol"] != "h2" {
			t.Errorf("why endpoint %d = %+v; want source static, transforms [stage], protocol=h2", i, e)
		}
	}
	if !records["services[0].endpoints[0]"] || !records["services[0].endpoints[1]"] {
		t.Errorf("why names the records %v, want services[0].endpoints[0] and [1]", records)
	}
	if code, _ := bridgetest.Get(admin + "/debug/why?cluster=nope"); code != http.StatusNotFound {
		t.Errorf("why of an unknown cluster: %d, want 404", code)
	}
}

// TestShapedClusterForAllClients checks the same rule for every client
// class reaches grpc-go too, which accepts it and routes RPCs.
func TestShapedClusterForAllClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs, ports := grpcxdstest.Backends(t, 2)
	in := bridgetest.Start(t, shapedConfig(writeServices(t, ports), "all"))
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)
	hits := grpcxdstest.Dial(t, in.XDSAddr().String(), "grpc-1", "greeter").Hits(ctx, 20)
	if hits[addrs[0]]+hits[addrs[1]] != 20 {
		t.Errorf("grpc-go RPCs reached %v, want all 20 on %v", hits, addrs)
	}
	dump, _ := configDump(t, "http://"+in.AdminAddr().String()+"/debug/config_dump?node=grpc-1")
	if clusters := dump[xds.ClusterType]; len(clusters) != 1 || !strings.Contains(clusters[0].Resource.String(), "LEAST_REQUEST") {
		t.Errorf("grpc-go holds clusters %v; want greeter shaped", clusters)
	}
}

// TestEnvoyTLSIsNACKedByGRPC backs the documentation's advice to limit an
// Envoy-style TLS transport socket to Envoy clients: grpc-go rejects the
// cluster (it wants certificate-provider instances), and the bridge records
// the NACK.
func TestEnvoyTLSIsNACKedByGRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, ports := grpcxdstest.Backends(t, 1)
	cfg := strings.Replace(shapedConfig(writeServices(t, ports), "all"), "      lb_policy: LEAST_REQUEST\n", `      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
          sni: greeter.internal.example
          common_tls_context: {validation_context: {trusted_ca: {filename: /etc/ssl/certs/ca.pem}}}
`, 1)
	in := bridgetest.Start(t, cfg)
	admin := "http://" + in.AdminAddr().String()
	bridgetest.WaitReady(t, in.AdminAddr().String(), bridgetest.Patience)

	rpc := make(chan error, 1)
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	go func() { rpc <- grpcxdstest.Dial(t, in.XDSAddr().String(), "grpc-1", "greeter").Try(rctx) }()
	var nack string
	bridgetest.Eventually(t, bridgetest.Patience, "grpc-go to NACK the cluster", func() bool {
		var clients []xds.ClientStatus
		getJSON(t, admin+"/clients", &clients)
		for _, c := range clients {
			for _, ts := range c.Types {
				if c.ID == "grpc-1" && ts.TypeURL == xds.ClusterType && ts.NACK != nil {
					nack = ts.NACK.Error
					return true
				}
			}
		}
		return false
	})
	if !strings.Contains(nack, "ca_certificate_provider_instance") {
		t.Errorf("NACK %q, want it to be about the missing certificate provider", nack)
	}
	rcancel()
	if err := <-rpc; err == nil {
		t.Error("an RPC succeeded through a cluster grpc-go rejected")
	}
}
