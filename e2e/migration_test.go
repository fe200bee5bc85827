package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/hashicorp/consul/api"
	mdns "github.com/miekg/dns"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/bridge"
	"github.com/xdsbridge/xdsbridge/test/bridgetest"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/dnstest"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// migration is the directory of the migration examples (docs/migration.md).
var migration = filepath.Join(examples, "migration")

// bootstrap reads an example Envoy bootstrap strictly and validates it.
func bootstrap(t *testing.T, path string) *bootstrapv3.Bootstrap {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("%s is not a v3 Bootstrap: %v", path, err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("%s is an invalid Bootstrap: %v", path, err)
	}
	return &b
}

// dumped is the output of `bridge dump --format json`, decoded.
type dumped struct {
	clusters    map[string]*clusterv3.Cluster
	assignments map[string]*endpointv3.ClusterLoadAssignment
}

// dump runs `bridge dump --format json` on config and decodes its stdout.
func dump(t *testing.T, config string, args ...string) dumped {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, append([]string{"dump", "--config", config, "--format", "json", "--log-level", "warn"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bridge dump %s: %v\n%s", config, err, stderr.String())
	}
	var cd adminv3.ConfigDump
	if err := protojson.Unmarshal(stdout.Bytes(), &cd); err != nil {
		t.Fatalf("bridge dump output is not an envoy.admin.v3.ConfigDump: %v\n%s", err, stdout.String())
	}
	all, _, err := bridge.Unpack(&cd)
	if err != nil {
		t.Fatal(err)
	}
	d := dumped{clusters: map[string]*clusterv3.Cluster{}, assignments: map[string]*endpointv3.ClusterLoadAssignment{}}
	for _, r := range all[resource.ClusterType] {
		var c clusterv3.Cluster
		if err := r.Resource.UnmarshalTo(&c); err != nil {
			t.Fatalf("dumped cluster: %v", err)
		}
		d.clusters[c.GetName()] = &c
	}
	for _, r := range all[resource.EndpointType] {
		var a endpointv3.ClusterLoadAssignment
		if err := r.Resource.UnmarshalTo(&a); err != nil {
			t.Fatalf("dumped assignment: %v", err)
		}
		d.assignments[a.GetClusterName()] = &a
	}
	return d
}

// validate runs `bridge validate` on an example.
func validate(t *testing.T, config string) {
	t.Helper()
	if code, out := runBinary(t, 30*time.Second, "validate", "--config", config); code != 0 {
		t.Fatalf("validate %s: exit %d\n%s", config, code, out)
	}
}

// sameAsBefore checks that every static cluster of the old bootstrap is
// served by the bridge with the same settings, apart from the fields that
// the move changes by design (discovery type, endpoints, DNS settings).
func sameAsBefore(t *testing.T, before *bootstrapv3.Bootstrap, d dumped) {
	t.Helper()
	for _, old := range before.GetStaticResources().GetClusters() {
		got := d.clusters[old.GetName()]
		if got == nil {
			t.Errorf("the bridge serves no cluster %q", old.GetName())
			continue
		}
		want := proto.Clone(old).(*clusterv3.Cluster)
		got = proto.Clone(got).(*clusterv3.Cluster)
		for _, c := range []*clusterv3.Cluster{want, got} {
			c.ClusterDiscoveryType, c.LoadAssignment, c.EdsClusterConfig = nil, nil, nil
			//lint:ignore SA1019 the old static bootstraps set dns_refresh_rate, deprecated or not, and the move drops it by design
			c.DnsLookupFamily, c.DnsRefreshRate = 0, nil //nolint:staticcheck // the old bootstraps set it, deprecated or not (the lint:ignore above tells a standalone staticcheck)
		}
		if !proto.Equal(want, got) {
			t.Errorf("cluster %q differs from the old static one:\nold:    %v\nbridge: %v", old.GetName(), want, got)
		}
	}
}

// addresses lists an assignment's endpoints as sorted "ip:port".
func addresses(a *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, l := range a.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, sa.GetAddress()+":"+strconv.FormatUint(uint64(sa.GetPortValue()), 10))
		}
	}
	slices.Sort(out)
	return out
}

// rewrite copies an example config into a temporary directory with old
// replaced by repl (a registry address), and returns the copy's path.
func rewrite(t *testing.T, path, old, repl string) string {
	t.Helper()
	return rewriteInto(t, t.TempDir(), path, old, repl)
}

// rewriteInto copies the example file path into dir, under the same base
// name, with each old string of the old, new pairs replaced by its new one
// (free ports for the examples' fixed ones, the addresses of test servers),
// and returns the copy's path. Every old string must occur in the file, so
// that an example edited out from under its test fails loudly.
func rewriteInto(t *testing.T, dir, path string, oldnew ...string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(oldnew); i += 2 {
		if !bytes.Contains(data, []byte(oldnew[i])) {
			t.Fatalf("%s does not contain %q", path, oldnew[i])
		}
	}
	out := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(out, []byte(strings.NewReplacer(oldnew...).Replace(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrationStaticToEDS(t *testing.T) {
	dir := filepath.Join(migration, "static-to-eds")
	config := filepath.Join(dir, "bridge.yaml")
	validate(t, config)
	before := bootstrap(t, filepath.Join(dir, "envoy-before.yaml"))
	after := bootstrap(t, filepath.Join(dir, "envoy.yaml"))
	if !slices.EqualFunc(before.GetStaticResources().GetListeners(), after.GetStaticResources().GetListeners(),
		func(a, b *listenerv3.Listener) bool { return proto.Equal(a, b) }) {
		t.Error("the new bootstrap changes the static listeners")
	}
	if after.GetDynamicResources().GetCdsConfig().GetAds() == nil {
		t.Error("the new bootstrap does not take CDS over ADS")
	}
	d := dump(t, config)
	sameAsBefore(t, before, d)
	for _, old := range before.GetStaticResources().GetClusters() {
		if got, want := addresses(d.assignments[old.GetName()]), addresses(old.GetLoadAssignment()); !slices.Equal(got, want) {
			t.Errorf("cluster %q: the bridge serves endpoints %v, the old static cluster had %v", old.GetName(), got, want)
		}
	}
}

// exampleDNS runs CoreDNS as examples/migration/coredns/Corefile says (in
// a copy of that directory, so the zone file's relative path holds), on a
// free port instead of 5353, and returns its address once it answers.
func exampleDNS(t *testing.T) string {
	t.Helper()
	dir, addr := t.TempDir(), freeport.Addr(t)
	_, port, _ := net.SplitHostPort(addr)
	corefile := rewriteInto(t, dir, filepath.Join(migration, "coredns", "Corefile"), ":5353 {", ":"+port+" {")
	rewriteInto(t, dir, filepath.Join(migration, "coredns", "db.example.org"))
	cmd := exec.Command(dnstest.Binary(t), "-conf", filepath.Base(corefile))
	cmd.Dir = dir
	startProgram(t, "coredns", cmd, nil)
	bridgetest.Eventually(t, patience, "CoreDNS to answer for example.org", func() bool {
		m := new(mdns.Msg)
		m.SetQuestion("example.org.", mdns.TypeSOA)
		r, err := mdns.Exchange(m, addr)
		return err == nil && r.Rcode == mdns.RcodeSuccess && len(r.Answer) == 1
	})
	return addr
}

func TestMigrationStrictDNS(t *testing.T) {
	dir := filepath.Join(migration, "strict-dns")
	config := filepath.Join(dir, "bridge.yaml")
	validate(t, config)
	before := bootstrap(t, filepath.Join(dir, "envoy-before.yaml"))
	d := dump(t, rewrite(t, config, "127.0.0.1:5353", exampleDNS(t)))
	sameAsBefore(t, before, d)
	if got := addresses(d.assignments["api"]); !slices.Equal(got, []string{"10.0.3.1:8080", "10.0.3.2:8080"}) {
		t.Errorf("api endpoints %v, want the A records on port 8080", got)
	}
	if got := addresses(d.assignments["search"]); !slices.Equal(got, []string{"10.0.4.1:9200"}) {
		t.Errorf("search endpoints %v, want the A record on port 9200", got)
	}
}

func TestMigrationConsulTemplate(t *testing.T) {
	config := filepath.Join(migration, "consul-template", "bridge.yaml")
	validate(t, config)
	agent := consultest.Start(t)
	for _, r := range []*api.AgentServiceRegistration{
		{ID: "web-1", Name: "web", Address: "10.0.5.1", Port: 8080, Tags: []string{"production"}},
		{ID: "web-2", Name: "web", Address: "10.0.5.2", Port: 8080, Tags: []string{"production", "canary"}},
		{ID: "batch-1", Name: "batch", Address: "10.0.6.1", Port: 9000, Tags: []string{"staging"}},
	} {
		if err := agent.Client().Agent().ServiceRegister(r); err != nil {
			t.Fatal(err)
		}
	}
	d := dump(t, rewrite(t, config, "127.0.0.1:8500", agent.HTTPAddr))
	web := d.clusters["web"]
	if web == nil || web.GetLbPolicy() != clusterv3.Cluster_LEAST_REQUEST || len(web.GetLbSubsetConfig().GetSubsetSelectors()) != 1 {
		t.Fatalf("cluster web = %v; want LEAST_REQUEST with the stage subset", web)
	}
	if _, ok := d.clusters["batch"]; ok {
		t.Error("batch (not tagged production) is served")
	}
	stages := map[string]string{}
	for _, l := range d.assignments["web"].GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			addr := e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
			stages[addr] = e.GetMetadata().GetFilterMetadata()["envoy.lb"].GetFields()["stage"].GetStringValue()
		}
	}
	if stages["10.0.5.1"] != "stable" || stages["10.0.5.2"] != "canary" {
		t.Errorf("web endpoint stages %v; want 10.0.5.1 stable, 10.0.5.2 canary", stages)
	}
}
