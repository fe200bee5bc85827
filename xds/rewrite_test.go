package xds

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// grpcListener is the proxyless chain's listener: an API listener whose
// HCM takes its routes over ADS.
func grpcListener(t testing.TB, name string) Resource {
	t.Helper()
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		t.Fatal(err)
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: name,
			ConfigSource: &corev3.ConfigSource{
				ResourceApiVersion:    corev3.ApiVersion_V3,
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return Resource{Type: ListenerType, Name: name, GRPCOnly: true, Message: &listenerv3.Listener{
		Name: name, ApiListener: &listenerv3.ApiListener{ApiListener: hcm},
	}}
}

// edsSource decodes the EDS config source of every cluster of a response
// and checks each cluster passes Envoy's validation rules.
func edsSource(t testing.TB, rs []*anypb.Any) []*corev3.ConfigSource {
	t.Helper()
	var out []*corev3.ConfigSource
	for _, a := range rs {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if err := c.ValidateAll(); err != nil {
			t.Fatalf("cluster %q: %v", c.Name, err)
		}
		out = append(out, c.GetEdsClusterConfig().GetEdsConfig())
	}
	return out
}

// wantSource checks cs is ADS (api == -1) or an api_config_source of that
// type naming cluster xds-main.
func wantSource(t testing.TB, cs *corev3.ConfigSource, api corev3.ApiConfigSource_ApiType) {
	t.Helper()
	if api < 0 {
		if cs.GetAds() == nil || cs.GetResourceApiVersion() != corev3.ApiVersion_V3 {
			t.Fatalf("config source %v, want ADS", cs)
		}
		return
	}
	acs := cs.GetApiConfigSource()
	if acs.GetApiType() != api || acs.GetTransportApiVersion() != corev3.ApiVersion_V3 ||
		cs.GetResourceApiVersion() != corev3.ApiVersion_V3 || len(acs.GetGrpcServices()) != 1 ||
		acs.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != "xds-main" {
		t.Fatalf("config source %v, want %v naming xds-main", cs, api)
	}
}

// TestPerTypeRewrites: an Envoy on per-type streams has no ads_config, so
// its clusters must name the bootstrap's xDS cluster, with the API type of
// its stream; ADS clients keep {ads: {}}.
func TestPerTypeRewrites(t *testing.T) {
	s := NewServer(Options{ConfigCluster: "xds-main"})
	s.Apply(services(2), nil)
	cc := serve(t, s)
	const ads = corev3.ApiConfigSource_ApiType(-1)

	for _, c := range []struct {
		name string
		open func(testing.TB) *sotw
		api  corev3.ApiConfigSource_ApiType
	}{
		{"sotw-ads", func(t testing.TB) *sotw { t.Helper(); return openADS(t, cc) }, ads},
		{"sotw-cds", func(t testing.TB) *sotw { t.Helper(); return openCDS(t, cc) }, corev3.ApiConfigSource_GRPC},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := c.open(t)
			st.send(req(ClusterType))
			r := st.recv()
			for _, cs := range edsSource(t, r.Resources) {
				wantSource(t, cs, c.api)
			}
		})
	}
	for _, c := range []struct {
		name string
		open func(testing.TB) *delta
		api  corev3.ApiConfigSource_ApiType
	}{
		{"delta-ads", func(t testing.TB) *delta { t.Helper(); return openDeltaADS(t, cc) }, ads},
		{"delta-cds", func(t testing.TB) *delta { t.Helper(); return openDeltaCDS(t, cc) }, corev3.ApiConfigSource_DELTA_GRPC},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := c.open(t)
			st.send(deltaReq(ClusterType, "*"))
			r := st.recv()
			var anys []*anypb.Any
			for _, x := range r.Resources {
				anys = append(anys, x.Resource)
			}
			for _, cs := range edsSource(t, anys) {
				wantSource(t, cs, c.api)
			}
			// A reconnect claiming the variant's versions is sent nothing.
			again := c.open(t)
			claim := deltaReq(ClusterType, "*")
			claim.InitialResourceVersions = map[string]string{}
			for _, x := range r.Resources {
				claim.InitialResourceVersions[x.Name] = x.Version
			}
			again.send(claim)
			again.none(200 * time.Millisecond)
		})
	}
}

func openDeltaCDS(t testing.TB, cc *grpc.ClientConn) *delta {
	t.Helper()
	st, err := clusterservice.NewClusterDiscoveryServiceClient(cc).DeltaClusters(ctxFor(t))
	return open(t, st, err)
}

// TestRewriteBuiltOncePerVersion: every client of a Rewrite shares one
// entry per resource version, and a change builds a new one.
func TestRewriteBuiltOncePerVersion(t *testing.T) {
	s := NewServer(Options{ConfigCluster: "xds-main"})
	s.Apply([]Resource{cluster("a", 1), grpcListener(t, "a")}, nil)
	v := s.rewrites.sotw
	e := s.types[ClusterType].slots["a"].cur
	x, y := v.of(e), v.of(e)
	if x != y || x == e {
		t.Fatalf("variant entries %p %p of %p: want one shared entry distinct from the original", x, y, e)
	}
	if s.rewrites.delta.of(e) == x {
		t.Fatal("GRPC and DELTA_GRPC variants share an entry")
	}
	wantSource(t, edsSource(t, []*anypb.Any{x.any})[0], corev3.ApiConfigSource_GRPC)

	// The gRPC listener's RDS config source is rewritten too.
	l := v.of(s.types[ListenerType].slots["a"].cur)
	var lm listenerv3.Listener
	var hcm hcmv3.HttpConnectionManager
	if err := l.any.UnmarshalTo(&lm); err != nil {
		t.Fatal(err)
	}
	if err := lm.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	if err := lm.GetApiListener().GetApiListener().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	if err := hcm.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	wantSource(t, hcm.GetRds().GetConfigSource(), corev3.ApiConfigSource_GRPC)

	// An assignment has no config source: every variant is the original.
	s.Apply([]Resource{assignment("a", 1)}, nil)
	if a := s.types[EndpointType].slots["a"].cur; v.of(a) != a {
		t.Fatal("an assignment got a variant")
	}
	s.Apply([]Resource{cluster("a", 2)}, nil)
	if e2 := s.types[ClusterType].slots["a"].cur; v.of(e2) == x || v.of(e2).version == x.version {
		t.Fatal("a new cluster version kept the old variant")
	}
}
