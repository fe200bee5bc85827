package envoysim

import (
	"errors"
	"fmt"
	"hash/maphash"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// seed is fixed for the process so that hashes compare across clients and
// with Hash.
var seed = maphash.MakeSeed()

// HashBytes is the hash the client keeps of a resource's serialized bytes.
func HashBytes(b []byte) uint64 { return maphash.Bytes(seed, b) }

// Hash returns HashBytes of m marshalled deterministically, as servers
// marshal resources, so that a test or the load generator can tell whether a
// client holds exactly m.
func Hash(m proto.Message) (uint64, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("marshalling for hash: %w", err)
	}
	return HashBytes(b), nil
}

// decoded is one resource of a response.
type decoded struct {
	name    string
	version string
	hash    uint64
	msg     any
	refs    *refs // what a listener refers to, also in Light mode
}

// decodeAll decodes the resources of one response, anys[i] the payload of
// the i-th, and names them in r. named, when set, gives the i-th
// resource's name and version as the response states them outside its
// payload (delta responses do), which must match the payload's. It returns
// what was decoded and the first reason to NACK the response: a resource
// that does not decode or does not match, or Options.Reject.
func (c *Client) decodeAll(r *Received, anys []*anypb.Any, named func(i int) (name, version string)) ([]decoded, error) {
	rs := make([]decoded, 0, len(anys))
	var reject error
	for i, a := range anys {
		d, err := c.decode(r.TypeURL, a)
		d.version = r.Version
		if named != nil {
			name, version := named(i)
			if err == nil && d.name != name {
				err = fmt.Errorf("resource named %q carries %q", name, d.name)
			}
			d.name, d.version = name, version
		}
		if err != nil && reject == nil {
			reject = err
		}
		d.name, d.version = c.opts.Intern.string(d.name), c.opts.Intern.string(d.version)
		r.Names = append(r.Names, d.name)
		rs = append(rs, d)
	}
	if reject == nil && c.opts.Reject != nil {
		reject = c.opts.Reject(r.TypeURL, anys)
	}
	return rs, reject
}

// decode turns one resource into what the client keeps. In Light mode only
// the name is read, straight from the wire: Cluster.name,
// ClusterLoadAssignment.cluster_name, Listener.name and
// RouteConfiguration.name are all field 1.
func (c *Client) decode(typeURL string, a *anypb.Any) (decoded, error) {
	if a == nil {
		return decoded{}, errors.New("nil resource")
	}
	if a.GetTypeUrl() != typeURL {
		return decoded{}, fmt.Errorf("resource of type %q in a %q response", a.GetTypeUrl(), typeURL)
	}
	d := decoded{hash: HashBytes(a.GetValue())}
	if typeURL == ListenerType && c.opts.Listeners {
		// Listeners are few, and the client follows what they name.
		l := &listenerv3.Listener{}
		if err := a.UnmarshalTo(l); err != nil {
			return decoded{}, fmt.Errorf("decoding listener: %w", err)
		}
		d.name, d.refs = c.opts.Intern.string(l.GetName()), listenerRefs(l)
		if !c.opts.Light {
			d.msg = a
		}
		return d, nil
	}
	if c.opts.Light {
		name, err := wireName(a.GetValue())
		d.name = c.opts.Intern.bytes(name)
		return d, err
	}
	switch typeURL {
	case ClusterType:
		m := &clusterv3.Cluster{}
		if err := a.UnmarshalTo(m); err != nil {
			return decoded{}, fmt.Errorf("decoding cluster: %w", err)
		}
		d.name, d.msg = m.GetName(), m
	case EndpointType:
		m := &endpointv3.ClusterLoadAssignment{}
		if err := a.UnmarshalTo(m); err != nil {
			return decoded{}, fmt.Errorf("decoding assignment: %w", err)
		}
		d.name, d.msg = m.GetClusterName(), m
	default:
		name, err := wireName(a.GetValue())
		if err != nil {
			return decoded{}, err
		}
		d.name, d.msg = string(name), a
	}
	return d, nil
}

// wireName returns field 1 (a string) of a serialized message, aliasing b.
func wireName(b []byte) ([]byte, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("reading resource name: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("reading resource name: %w", protowire.ParseError(n))
			}
			return v, nil
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, fmt.Errorf("reading resource name: %w", protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil, nil
}
