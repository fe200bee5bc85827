package etcd

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/xdsbridge/xdsbridge/sources"
)

// The formats of a services entry (Entry.Format).
const (
	// FormatGRPCNaming is what gRPC-Go's etcd naming manager
	// (go.etcd.io/etcd/client/v3/naming/endpoints) writes: one key
	// <target>/<anything> per instance, whose value is
	// {"Op":0,"Addr":"ip:port","Metadata":...}.
	FormatGRPCNaming = "grpc-naming"
	// FormatSkyDNS is a record of CoreDNS's etcd plugin (and SkyDNS
	// before it): {"host":"ip","port":8080,"priority":10,"weight":5}
	// under the reversed domain name, /skydns/local/example/web/x1 for
	// x1.web.example.local.
	FormatSkyDNS = "skydns"
	// FormatJSON is one instance per key in the file source's endpoint
	// schema: {"address":"ip","port":8080,"weight":5,...}.
	FormatJSON = "json"
)

// format reads what one kind of registrar writes under a prefix.
type format struct {
	// checkPrefix rejects the prefixes under which the format cannot name
	// services; nil accepts any.
	checkPrefix func(prefix string) error
	// service names the service that key, below prefix, is an instance
	// of, when the entry does not name one.
	service func(prefix, key string) (string, error)
	// endpoint reads a key's value: the instance, errNotInstance for a
	// record the format holds that is no instance, or why the value
	// cannot be read.
	endpoint func(value []byte) (sources.Endpoint, error)
}

var formats = map[string]format{
	FormatGRPCNaming: {service: pathService, endpoint: grpcNamingEndpoint},
	FormatSkyDNS:     {checkPrefix: skydnsPrefix, service: skydnsService, endpoint: skydnsEndpoint},
	FormatJSON:       {service: pathService, endpoint: jsonEndpoint},
}

func formatNames() string {
	names := make([]string, 0, len(formats))
	for n := range formats {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// errNotInstance marks a record that is neither served nor counted as
// dropped: a SkyDNS mail (MX) or text-only (TXT) record, say.
var errNotInstance = errors.New("not an instance")

// parse reads one key of the entry: the service it belongs to and its
// instance (see format.endpoint for the errors).
func (e Entry) parse(key string, value []byte) (string, sources.Endpoint, error) {
	f := formats[e.Format]
	svc := e.Cluster
	if svc == "" {
		var err error
		if svc, err = f.service(e.Prefix, key); err != nil {
			return "", sources.Endpoint{}, err
		}
	}
	ep, err := f.endpoint(value)
	return svc, ep, err
}

// pathService names a key's service by its path below the prefix:
// prefix/web/x names "web", prefix/eu/web/x "eu/web", and a key right
// under the prefix (prefix/x) the prefix's last element.
func pathService(prefix, key string) (string, error) {
	rel := key[len(prefix):]
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		if rel == "" {
			return "", errors.New("the key is the prefix itself")
		}
		return path.Base(strings.TrimSuffix(prefix, "/")), nil
	}
	svc := rel[:i]
	switch {
	case i == len(rel)-1:
		return "", errors.New("the key ends with a slash (want <service>/<instance>)")
	case svc == "" || strings.HasPrefix(svc, "/") || strings.HasSuffix(svc, "/") || strings.Contains(svc, "//"):
		return "", fmt.Errorf("the key's service path %q has an empty element", svc)
	}
	return svc, nil
}

// hostPort reads an instance address of the form ip:port. Host names are
// refused: EDS needs IP addresses, and the source resolves no names.
func hostPort(s string) (sources.Endpoint, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return sources.Endpoint{}, fmt.Errorf("address %q is not ip:port", s)
	}
	ep, err := ipPort(host, port)
	if err != nil {
		return sources.Endpoint{}, fmt.Errorf("address %q: %w", s, err)
	}
	return ep, nil
}

func ipPort(host, port string) (sources.Endpoint, error) {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return sources.Endpoint{}, fmt.Errorf("%q is a host name, not an IP address (names are not resolved)", host)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return sources.Endpoint{}, fmt.Errorf("port %q is outside 1..65535", port)
	}
	return sources.Endpoint{Address: a.String(), Port: uint32(n), Weight: 1, Health: sources.HealthHealthy}, nil
}
