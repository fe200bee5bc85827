package rest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/test/xdstest"
	"github.com/xdsbridge/xdsbridge/xds"
)

// restClient is a REST client as Envoy's http subscription is: it POSTs JSON
// DiscoveryRequests and decodes the JSON DiscoveryResponses.
type restClient struct {
	t    *testing.T
	url  string
	node *corev3.Node
}

func (p *restClient) poll(path string, req *discoveryv3.DiscoveryRequest) (int, *discoveryv3.DiscoveryResponse) {
	p.t.Helper()
	req.Node = p.node
	body, err := protojson.Marshal(req)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.post(path, body)
}

func (p *restClient) post(path string, body []byte) (int, *discoveryv3.DiscoveryResponse) {
	p.t.Helper()
	resp, err := http.Post(p.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		p.t.Fatalf("Content-Type %q", ct)
	}
	var r discoveryv3.DiscoveryResponse
	if err := protojson.Unmarshal(b, &r); err != nil {
		p.t.Fatalf("decoding response: %v\n%s", err, b)
	}
	return resp.StatusCode, &r
}

func setup(t *testing.T) (*xds.Server, *Handler, *restClient) {
	t.Helper()
	s := xds.NewServer(xds.Options{})
	h := New(Options{Server: s, ConfigCluster: "xds-rest", RefreshDelay: 2 * time.Second, MaxRequestBytes: 4096})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return s, h, &restClient{t: t, url: srv.URL, node: &corev3.Node{Id: "envoy-rest", UserAgentName: "envoy"}}
}

func TestPolling(t *testing.T) {
	s, h, p := setup(t)
	const cds, eds = "/v3/discovery:clusters", "/v3/discovery:endpoints"
	if code, _ := p.poll(cds, &discoveryv3.DiscoveryRequest{}); code != http.StatusServiceUnavailable {
		t.Fatalf("before readiness: %d, want 503", code)
	}
	s.Apply([]xds.Resource{xdstest.Cluster("a", time.Second), xdstest.Assignment("a", 1), xdstest.Cluster("b", time.Second), xdstest.Assignment("b", 2)}, nil)

	code, r := p.poll(cds, &discoveryv3.DiscoveryRequest{})
	if code != http.StatusOK || len(r.Resources) != 2 || r.TypeUrl != xds.ClusterType || r.VersionInfo == "" {
		t.Fatalf("CDS poll: %d %v", code, r)
	}
	for _, a := range r.Resources {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if err := c.ValidateAll(); err != nil {
			t.Fatal(err)
		}
		acs := c.GetEdsClusterConfig().GetEdsConfig().GetApiConfigSource()
		if acs.GetApiType() != corev3.ApiConfigSource_REST || acs.GetClusterNames()[0] != "xds-rest" ||
			acs.GetRefreshDelay().AsDuration() != 2*time.Second || acs.GetTransportApiVersion() != corev3.ApiVersion_V3 {
			t.Fatalf("cluster %s: eds_config %v, want REST polling xds-rest", c.Name, c.GetEdsClusterConfig().GetEdsConfig())
		}
	}
	if code, _ := p.poll(cds, &discoveryv3.DiscoveryRequest{VersionInfo: r.VersionInfo}); code != http.StatusNotModified {
		t.Fatalf("CDS poll at the current version: %d, want 304", code)
	}

	// EDS by name: exactly the store's assignment, byte for byte.
	code, e := p.poll(eds, &discoveryv3.DiscoveryRequest{ResourceNames: []string{"a", "unknown"}})
	if code != http.StatusOK || len(e.Resources) != 1 {
		t.Fatalf("EDS poll: %d %v", code, e)
	}
	var cla endpointv3.ClusterLoadAssignment
	if err := e.Resources[0].UnmarshalTo(&cla); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&cla, xdstest.Assignment("a", 1).Message) {
		t.Fatalf("assignment %v", &cla)
	}
	items, _ := s.Select(xds.EndpointType, []string{"a"}, xds.View{})
	if e.VersionInfo != xds.VersionOf(items) {
		t.Fatalf("version_info %q, want the store's %q", e.VersionInfo, xds.VersionOf(items))
	}
	// An endpoint change of b does not modify a's answer; of a it does.
	s.Apply([]xds.Resource{xdstest.Assignment("b", 3)}, nil)
	if code, _ := p.poll(eds, &discoveryv3.DiscoveryRequest{VersionInfo: e.VersionInfo, ResourceNames: []string{"a", "unknown"}}); code != http.StatusNotModified {
		t.Fatalf("EDS poll after an unrelated change: %d, want 304", code)
	}
	s.Apply([]xds.Resource{xdstest.Assignment("a", 4)}, nil)
	if code, e2 := p.poll(eds, &discoveryv3.DiscoveryRequest{VersionInfo: e.VersionInfo, ResourceNames: []string{"a"}}); code != http.StatusOK || e2.VersionInfo == e.VersionInfo {
		t.Fatalf("EDS poll after a change of a: %d %v", code, e2)
	}

	// A NACK is recorded, and the rejected version is not sent again.
	s.Apply([]xds.Resource{xdstest.Cluster("b", 13*time.Second)}, nil)
	code, bad := p.poll(cds, &discoveryv3.DiscoveryRequest{VersionInfo: r.VersionInfo})
	if code != http.StatusOK {
		t.Fatalf("CDS poll after a change: %d", code)
	}
	nack := &discoveryv3.DiscoveryRequest{VersionInfo: r.VersionInfo, ErrorDetail: &status.Status{Message: "connect_timeout 13s refused"}}
	if code, _ := p.poll(cds, nack); code != http.StatusNotModified {
		t.Fatalf("NACK of the current version: %d, want 304", code)
	}
	cs := h.Clients()
	if len(cs) != 1 || cs[0].ID != "envoy-rest" || cs[0].Variant != "rest" {
		t.Fatalf("clients %+v", cs)
	}
	var ts xds.TypeStatus
	for _, x := range cs[0].Types {
		if x.TypeURL == xds.ClusterType {
			ts = x
		}
	}
	if ts.NACK == nil || ts.NACK.Version != bad.VersionInfo || ts.NACK.Error != "connect_timeout 13s refused" || ts.AckedVersion != r.VersionInfo {
		t.Fatalf("CDS status %+v (NACK %+v)", ts, ts.NACK)
	}
	s.Apply([]xds.Resource{xdstest.Cluster("b", 14*time.Second)}, nil)
	if code, _ := p.poll(cds, nack); code != http.StatusOK {
		t.Fatalf("poll after a fix: %d, want 200", code)
	}
}

func TestPollingErrors(t *testing.T) {
	s, _, p := setup(t)
	s.Apply([]xds.Resource{xdstest.Cluster("a", time.Second)}, nil)
	cases := []struct {
		name, path, method, body string
		want                     int
	}{
		{"unknown path", "/v3/discovery:secrets", "POST", "{}", http.StatusNotFound},
		{"GET", "/v3/discovery:clusters", "GET", "", http.StatusMethodNotAllowed},
		{"not JSON", "/v3/discovery:clusters", "POST", "{", http.StatusBadRequest},
		{"other type", "/v3/discovery:clusters", "POST", `{"type_url": "` + xds.EndpointType + `"}`, http.StatusBadRequest},
		{"too large", "/v3/discovery:clusters", "POST", `{"resource_names": ["` + strings.Repeat("x", 5000) + `"]}`, http.StatusRequestEntityTooLarge},
		{"unknown field", "/v3/discovery:clusters", "POST", `{"future_field": 1}`, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, p.url+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.want)
			}
		})
	}
}

// TestPollersBounded: node ids are client input; the table of pollers
// stays within MaxClients.
func TestPollersBounded(t *testing.T) {
	s := xds.NewServer(xds.Options{})
	s.Apply([]xds.Resource{xdstest.Cluster("a", time.Second)}, nil)
	h := New(Options{Server: s, MaxClients: 10})
	for i := range 50 {
		p := &restClient{node: &corev3.Node{Id: strconv.Itoa(i) + strings.Repeat("n", 1000)}}
		body, _ := protojson.Marshal(&discoveryv3.DiscoveryRequest{Node: p.node})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v3/discovery:clusters", bytes.NewReader(body)))
		if w.Code != http.StatusOK {
			t.Fatalf("poll %d: %d", i, w.Code)
		}
	}
	cs := h.Clients()
	if len(cs) != 10 {
		t.Fatalf("%d pollers kept, want 10", len(cs))
	}
	for _, c := range cs {
		if len(c.ID) > maxIDLen {
			t.Fatalf("id of %d bytes kept", len(c.ID))
		}
	}
}

// BenchmarkPoll measures the cost of a poll of 1,000 clusters at the
// current version (304), of one built after a cluster change (200), and
// of one named assignment (304).
func BenchmarkPoll(b *testing.B) {
	s := xds.NewServer(xds.Options{})
	var rs []xds.Resource
	for i := range 1000 {
		name := "svc-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoa(i)
		rs = append(rs, xdstest.Cluster(name, time.Second), xdstest.Assignment(name, uint32(i+1)))
	}
	s.Apply(rs, nil)
	h := New(Options{Server: s})
	run := func(b *testing.B, path string, req *discoveryv3.DiscoveryRequest) {
		b.Helper()
		body, _ := protojson.Marshal(req)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		var r discoveryv3.DiscoveryResponse
		if err := protojson.Unmarshal(w.Body.Bytes(), &r); err != nil {
			b.Fatal(err)
		}
		req.VersionInfo = r.VersionInfo
		body, _ = protojson.Marshal(req)
		b.ResetTimer()
		for range b.N {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
			if w.Code != http.StatusNotModified {
				b.Fatalf("status %d", w.Code)
			}
		}
	}
	b.Run("cds-1000-not-modified", func(b *testing.B) {
		run(b, "/v3/discovery:clusters", &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "n"}})
	})
	b.Run("cds-1000-after-a-cluster-change", func(b *testing.B) {
		body, _ := protojson.Marshal(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "n"}})
		for i := range b.N {
			b.StopTimer()
			s.Apply([]xds.Resource{xdstest.Cluster(rs[0].Name, time.Duration(1+i%2)*time.Second)}, nil)
			b.StartTimer()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v3/discovery:clusters", bytes.NewReader(body)))
			if w.Code != http.StatusOK {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
	b.Run("eds-1-not-modified", func(b *testing.B) {
		run(b, "/v3/discovery:endpoints", &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "n"}, ResourceNames: []string{rs[0].Name}})
	})
}

func itoa(i int) string { return strconv.Itoa(i) }
