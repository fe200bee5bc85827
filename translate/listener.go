package translate

import (
	"fmt"
	"net/netip"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xdsbridge/xdsbridge/settings"
)

// The names Envoy knows the listener's filters and transport socket by.
const (
	HCMFilter       = "envoy.filters.network.http_connection_manager"
	TCPProxyFilter  = "envoy.filters.network.tcp_proxy"
	TLSSocket       = "envoy.transport_sockets.tls"
	DefaultListenIP = "0.0.0.0"
)

// ListenerSpec is one entry of the `listeners` section: a listener on
// Address:Port whose one filter chain is either HTTP (an
// HttpConnectionManager taking the route configuration RouteConfig by RDS,
// the router last) or TCP (a TCP proxy to Cluster), optionally behind TLS
// whose certificates and validation context are SDS secrets. The fragments
// (Envoy Listener, FilterChain and HttpConnectionManager fields, written as
// in an Envoy configuration) set what the bridge does not.
type ListenerSpec struct {
	Name    string
	Address string // an IP; empty: DefaultListenIP
	Port    uint32
	// RouteConfig (HTTP) or Cluster (TCP): exactly one.
	RouteConfig string
	Cluster     string
	// StatPrefix of the HTTP connection manager or TCP proxy; empty: Name.
	StatPrefix string
	TLS        *TLSSpec
	// Listener, FilterChain and ConnectionManager are fragments, nil when
	// not given. A ConnectionManager fragment's http_filters go before
	// the router.
	Listener          map[string]any
	FilterChain       map[string]any
	ConnectionManager map[string]any
}

// TLSSpec is a listener's TLS: the SDS names of its certificates
// (tls_certificate secrets) and, to verify client certificates, of a
// validation context secret.
type TLSSpec struct {
	Certificates             []string
	Validation               string
	RequireClientCertificate bool
}

// The fields of each fragment the bridge sets.
var (
	listenerOwned    = []protoreflect.Name{"name", "address", "additional_addresses", "filter_chains", "default_filter_chain", "api_listener"}
	filterChainOwned = []protoreflect.Name{"filters"}
	hcmOwned         = []protoreflect.Name{"rds", "route_config", "scoped_routes"}
)

// NewListener builds and validates the listener of spec. Errors are
// *settings.KeyError values relative to the listener's entry.
func NewListener(spec ListenerSpec) (*listenerv3.Listener, error) {
	if spec.Name == "" {
		return nil, settings.Errorf("name", "is required")
	}
	addr := spec.Address
	if addr == "" {
		addr = DefaultListenIP
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Zone() != "" {
		return nil, settings.Errorf("address", "%q is not an IP address", spec.Address)
	}
	if spec.Port == 0 || spec.Port > 65535 {
		return nil, settings.Errorf("port", "%d is outside 1..65535", spec.Port)
	}
	if (spec.RouteConfig == "") == (spec.Cluster == "") {
		return nil, settings.Errorf("route_config", "give exactly one of route_config (HTTP) and cluster (TCP)")
	}
	stat := spec.StatPrefix
	if stat == "" {
		stat = spec.Name
	}
	l := &listenerv3.Listener{}
	if spec.Listener != nil {
		if _, err := decodeFragment(l, spec.Listener, "listener", listenerOwned, "is set by the bridge"); err != nil {
			return nil, err
		}
	}
	fc := &listenerv3.FilterChain{}
	owned := filterChainOwned
	if spec.TLS != nil {
		owned = append(slices.Clip(owned), "transport_socket")
	}
	if spec.FilterChain != nil {
		if _, err := decodeFragment(fc, spec.FilterChain, "filter_chain", owned, "is set by the bridge"); err != nil {
			return nil, err
		}
	}
	var filter *listenerv3.Filter
	if spec.RouteConfig != "" {
		hcm, err := httpConnectionManager(spec.RouteConfig, stat, spec.ConnectionManager)
		if err != nil {
			return nil, err
		}
		filter = &listenerv3.Filter{Name: HCMFilter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)}}
	} else {
		tp := tcpProxy(spec.Cluster, stat)
		if err := tp.ValidateAll(); err != nil {
			return nil, invalidMessage("cluster", "the TCP proxy", nil, err)
		}
		filter = &listenerv3.Filter{Name: TCPProxyFilter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(tp)}}
	}
	fc.Filters = []*listenerv3.Filter{filter}
	if spec.TLS != nil {
		ts, err := downstreamTLS(*spec.TLS)
		if err != nil {
			return nil, settings.Prefix("tls", err)
		}
		fc.TransportSocket = ts
	}
	l.Name = spec.Name
	l.Address = socketAddress(addr, spec.Port)
	l.FilterChains = []*listenerv3.FilterChain{fc}
	if err := l.ValidateAll(); err != nil {
		return nil, invalidMessage("listener", "the listener", l.ProtoReflect().Descriptor(), err)
	}
	return l, nil
}

// socketAddress is a TCP address.
func socketAddress(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       ip,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// httpConnectionManager builds the HTTP connection manager taking route
// configuration route over ADS (RDS), with the fragment's fields and its
// HTTP filters before the router.
func httpConnectionManager(route, stat string, fragment map[string]any) (*hcmv3.HttpConnectionManager, error) {
	hcm := &hcmv3.HttpConnectionManager{}
	if fragment != nil {
		if _, err := decodeFragment(hcm, fragment, "connection_manager", hcmOwned, "is set by the bridge: the route configuration comes by RDS"); err != nil {
			return nil, err
		}
	}
	for i, f := range hcm.HttpFilters {
		if f.GetName() == RouterFilter || f.GetTypedConfig().GetTypeUrl() == httpFilters[0].GetTypedConfig().GetTypeUrl() {
			return nil, settings.Errorf(fmt.Sprintf("connection_manager.http_filters[%d]", i), "the router is added last by the bridge")
		}
	}
	if hcm.StatPrefix == "" {
		hcm.StatPrefix = stat
	}
	hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: adsSource, RouteConfigName: route}}
	hcm.HttpFilters = append(slices.Clip(hcm.HttpFilters), httpFilters[0])
	if err := hcm.ValidateAll(); err != nil {
		return nil, invalidMessage("connection_manager", "the HTTP connection manager", hcm.ProtoReflect().Descriptor(), err)
	}
	return hcm, nil
}

// tcpProxy builds a TCP proxy to cluster.
func tcpProxy(cluster, stat string) *tcpproxyv3.TcpProxy {
	return &tcpproxyv3.TcpProxy{StatPrefix: stat, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}}
}

// downstreamTLS builds the TLS transport socket of a listener whose
// certificates and validation context come by SDS over ADS.
func downstreamTLS(spec TLSSpec) (*corev3.TransportSocket, error) {
	if len(spec.Certificates) == 0 {
		return nil, settings.Errorf("certificates", "at least one certificate secret is required")
	}
	common := &tlsv3.CommonTlsContext{}
	for i, name := range spec.Certificates {
		if name == "" {
			return nil, settings.Errorf(fmt.Sprintf("certificates[%d]", i), "empty secret name")
		}
		common.TlsCertificateSdsSecretConfigs = append(common.TlsCertificateSdsSecretConfigs, sdsSecret(name))
	}
	if spec.Validation != "" {
		common.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
			ValidationContextSdsSecretConfig: sdsSecret(spec.Validation),
		}
	} else if spec.RequireClientCertificate {
		return nil, settings.Errorf("require_client_certificate", "needs a validation secret to verify client certificates against")
	}
	ctx := &tlsv3.DownstreamTlsContext{CommonTlsContext: common}
	if spec.RequireClientCertificate {
		ctx.RequireClientCertificate = wrapperspb.Bool(true)
	}
	if err := ctx.ValidateAll(); err != nil {
		return nil, invalidMessage("", "the TLS context", ctx.ProtoReflect().Descriptor(), err)
	}
	return &corev3.TransportSocket{Name: TLSSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)}}, nil
}

// sdsSecret names a secret that comes by SDS over ADS.
func sdsSecret(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: adsSource}
}
