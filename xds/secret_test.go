package xds

import (
	"bytes"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// keyBytes stands for a private key: no response, view or dump that a
// client without the grant can see may hold them.
var keyBytes = []byte("-----BEGIN PRIVATE KEY-----\nTOP-SECRET-KEY-MATERIAL\n-----END PRIVATE KEY-----\n")

// secret is a tls_certificate secret granted to the scopes of grant.
func secret(name string, grant ScopeSet) Resource {
	inline := func(b []byte) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
	}
	return Resource{Type: SecretType, Name: name, Private: true, Scopes: grant, Message: &tlsv3.Secret{
		Name: name,
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: inline([]byte("CHAIN")), PrivateKey: inline(keyBytes),
		}},
	}}
}

// edgeScoper puts node ids starting with "edge" in scope 1, "other" in
// scope 2, the rest nowhere.
func edgeScoper(n *corev3.Node) (int, string) {
	switch id := n.GetId(); {
	case len(id) >= 4 && id[:4] == "edge":
		return 1, "edge"
	case len(id) >= 5 && id[:5] == "other":
		return 2, "other"
	}
	return 0, ""
}

func node(id string) *corev3.Node { return &corev3.Node{Id: id, Cluster: "c", UserAgentName: "envoy"} }

func openSDS(t testing.TB, cc *grpc.ClientConn) *sotw {
	t.Helper()
	st, err := secretservice.NewSecretDiscoveryServiceClient(cc).StreamSecrets(ctxFor(t))
	return open(t, st, err)
}

func openDeltaSDS(t testing.TB, cc *grpc.ClientConn) *delta {
	t.Helper()
	st, err := secretservice.NewSecretDiscoveryServiceClient(cc).DeltaSecrets(ctxFor(t))
	return open(t, st, err)
}

// TestSecretsOnlyToGrantedScopes: a secret reaches the clients of the
// scopes granted it, asked by name or by wildcard, on ADS and on the SDS
// service, and no other client: not an unscoped one, not one of another
// scope, not by wildcard.
func TestSecretsOnlyToGrantedScopes(t *testing.T) {
	s := NewServer(Options{UnknownNameWait: time.Millisecond})
	s.SetScopes(edgeScoper)
	s.Apply([]Resource{secret("edge_cert", ScopeSet(0).With(1)), cluster("a", 1)}, nil)
	cc := serve(t, s)

	for _, tc := range []struct {
		name    string
		id      string
		granted bool
	}{
		{"granted", "edge-1", true},
		{"unscoped", "plain-1", false},
		{"other scope", "other-1", false},
	} {
		t.Run(tc.name+"/sotw-sds", func(t *testing.T) {
			st := openSDS(t, cc)
			st.send(&discoveryv3.DiscoveryRequest{Node: node(tc.id), TypeUrl: SecretType, ResourceNames: []string{"edge_cert"}})
			r := st.recv()
			if got := len(r.Resources) == 1; got != tc.granted {
				t.Fatalf("granted %v: %d resources", tc.granted, len(r.Resources))
			}
			if !tc.granted && bytes.Contains(mustMarshal(t, r), keyBytes) {
				t.Fatal("the key reached a client without the grant")
			}
		})
		t.Run(tc.name+"/delta-ads", func(t *testing.T) {
			st := openDeltaADS(t, cc)
			st.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(tc.id), TypeUrl: SecretType, ResourceNamesSubscribe: []string{"edge_cert"}})
			r := st.recv()
			if tc.granted {
				wantNames(t, deltaNames(r), "edge_cert")
				return
			}
			if len(r.Resources) != 0 || len(r.RemovedResources) != 1 {
				t.Fatalf("a client without the grant got %v, removed %v", deltaNames(r), r.RemovedResources)
			}
		})
		t.Run(tc.name+"/wildcard", func(t *testing.T) {
			st := openDeltaSDS(t, cc)
			st.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(tc.id), TypeUrl: SecretType, ResourceNamesSubscribe: []string{"*"}})
			r := st.recv()
			if got := len(r.Resources) == 1; got != tc.granted {
				t.Fatalf("granted %v: wildcard got %v", tc.granted, deltaNames(r))
			}
		})
	}

	// A replaced certificate reaches the granted client that holds it.
	st := openDeltaADS(t, cc)
	st.send(&discoveryv3.DeltaDiscoveryRequest{Node: node("edge-2"), TypeUrl: SecretType, ResourceNamesSubscribe: []string{"edge_cert"}})
	first := st.recv()
	rotated := secret("edge_cert", ScopeSet(0).With(1))
	rotated.Message.(*tlsv3.Secret).GetTlsCertificate().CertificateChain.Specifier = &corev3.DataSource_InlineBytes{InlineBytes: []byte("CHAIN2")}
	s.Apply([]Resource{rotated}, nil)
	if r := st.recv(); len(r.Resources) != 1 || r.Resources[0].Version == first.Resources[0].Version {
		t.Fatalf("rotation: %v", r)
	}

	// Views never serve a secret, and dumps redact it.
	if items, _ := s.Select(SecretType, nil, View{}); len(items) != 0 {
		t.Fatalf("a view serves %d secrets", len(items))
	}
	for _, d := range []Dump{s.Current(false), heldOf(t, s, "edge-2")} {
		if len(d[SecretType]) != 1 || bytes.Contains(mustMarshal(t, d[SecretType][0].Resource), keyBytes) {
			t.Fatalf("dump: %d secrets, key redacted: %v", len(d[SecretType]), len(d[SecretType]) == 1 && !bytes.Contains(mustMarshal(t, d[SecretType][0].Resource), keyBytes))
		}
	}
}

func heldOf(t *testing.T, s *Server, id string) Dump {
	t.Helper()
	d, ok := s.Sent(id)
	if !ok {
		t.Fatalf("node %s is not connected", id)
	}
	return d
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestListenerRewrite: a listener sent on a per-type stream names the
// bootstrap's cluster, not ADS, for its routes (RDS) and its secrets
// (SDS), and the stream's protocol.
func TestListenerRewrite(t *testing.T) {
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: "edge", RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{
		Rds: &hcmv3.Rds{RouteConfigName: "edge", ConfigSource: adsConfig()}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := anypb.New(&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "edge_cert", SdsConfig: adsConfig()}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	l := &listenerv3.Listener{Name: "edge", FilterChains: []*listenerv3.FilterChain{{
		Filters:         []*listenerv3.Filter{{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}},
		TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}},
	}}}
	s := NewServer(Options{ConfigCluster: "xds-main"})
	s.Apply([]Resource{{Type: ListenerType, Name: "edge", Message: l}}, nil)
	e := s.types[ListenerType].slots["edge"].cur
	for rw, api := range map[*Rewrite]corev3.ApiConfigSource_ApiType{
		s.rewrites.sotw: corev3.ApiConfigSource_GRPC, s.rewrites.delta: corev3.ApiConfigSource_DELTA_GRPC,
	} {
		got := &listenerv3.Listener{}
		if err := rw.of(e).any.UnmarshalTo(got); err != nil {
			t.Fatal(err)
		}
		var h hcmv3.HttpConnectionManager
		var tc tlsv3.DownstreamTlsContext
		if err := got.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&h); err != nil {
			t.Fatal(err)
		}
		if err := got.FilterChains[0].TransportSocket.GetTypedConfig().UnmarshalTo(&tc); err != nil {
			t.Fatal(err)
		}
		wantSource(t, h.GetRds().GetConfigSource(), api)
		wantSource(t, tc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetSdsConfig(), api)
	}
	if s.rewrites.sotw.of(e) == e {
		t.Fatal("the listener was not rewritten")
	}
}

func adsConfig() *corev3.ConfigSource {
	return &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}
