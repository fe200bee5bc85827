package translate

import (
	"fmt"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Clients is the class of xDS clients a shaping rule is for.
type Clients uint8

// The client classes. The engine tells gRPC clients by their node's
// user_agent_name (see xds.Resource.GRPC).
const (
	AllClients Clients = iota
	EnvoyClients
	GRPCClients
)

// ParseClients parses the `clients` key: all (or empty), envoy, grpc.
func ParseClients(s string) (Clients, error) {
	switch s {
	case "", "all":
		return AllClients, nil
	case "envoy":
		return EnvoyClients, nil
	case "grpc":
		return GRPCClients, nil
	}
	return 0, fmt.Errorf("unknown client class %q (want all, envoy or grpc)", s)
}

func (c Clients) String() string { return [...]string{"all", "envoy", "grpc"}[c] }

func (c Clients) has(grpc bool) bool {
	return c == AllClients || (c == GRPCClients) == grpc
}

// Rule is one cluster shaping rule: the services it selects, the clients it
// is for, and an Envoy Cluster fragment. Build it with NewRule.
type Rule struct {
	Match   sources.Selector
	Clients Clients
	// fragment holds the fields the rule sets; fields lists them, top level
	// only, in the order written.
	fragment *clusterv3.Cluster
	fields   []protoreflect.FieldDescriptor
}

// Shaping is the ordered list of rules; later rules override earlier ones.
// The zero value (and a nil *Shaping) shapes nothing.
type Shaping struct {
	Rules []Rule
}

// bridgeOwned are the cluster fields a fragment may not set: the bridge
// decides a cluster's name, discovery type and where its endpoints come
// from.
var bridgeOwned = []protoreflect.Name{"name", "type", "cluster_type", "eds_cluster_config", "load_assignment"}

// NewRule builds a rule from a Cluster fragment written as in an Envoy
// configuration (field names in snake_case or lowerCamelCase, Any values
// with "@type", durations like "5s" or "100ms"). It fails, with a
// *settings.KeyError whose key is the snake_case path of the offending
// field from "cluster", on an unknown field, a value of the wrong type (an
// unknown enum value lists the known ones), a field the bridge owns, or a
// fragment that makes the bridge's cluster fail validation.
func NewRule(match sources.Selector, clients Clients, fragment map[string]any) (Rule, error) {
	if err := match.Validate(); err != nil {
		return Rule{}, settings.Prefix("match", err)
	}
	r := Rule{Match: match, Clients: clients, fragment: &clusterv3.Cluster{}}
	fields, err := decodeFragment(r.fragment, fragment, "cluster", bridgeOwned, "is set by the bridge and cannot be shaped")
	if err != nil {
		return Rule{}, err
	}
	r.fields = fields
	// Check the result on a sample of the bridge's own cluster, so that a
	// rule that cannot produce a valid cluster fails at load time.
	if err := r.apply(Cluster("example", 0)).ValidateAll(); err != nil {
		return Rule{}, invalidMessage("cluster", "the shaped cluster", r.fragment.ProtoReflect().Descriptor(), err)
	}
	return r, nil
}

// apply replaces c's fields by the rule's. Each field is replaced whole,
// not merged: a later rule's outlier_detection replaces an earlier one's
// instead of mixing with it, and a scalar written as its default
// (lb_policy: ROUND_ROBIN) does override. The fields set share the rule's
// messages, which are never modified.
func (r Rule) apply(c *clusterv3.Cluster) *clusterv3.Cluster {
	dst, src := c.ProtoReflect(), r.fragment.ProtoReflect()
	for _, fd := range r.fields {
		if src.Has(fd) {
			dst.Set(fd, src.Get(fd))
		} else {
			dst.Clear(fd)
		}
	}
	return c
}

// Shape returns c shaped by every rule matching svc for that client class,
// in order, and the indexes of those rules. c itself is returned, untouched,
// when no rule matches. It is pure: c and svc are not modified.
func (s *Shaping) Shape(c *clusterv3.Cluster, svc sources.Service, grpc bool) (*clusterv3.Cluster, []int) {
	if s == nil {
		return c, nil
	}
	var applied []int
	for i, r := range s.Rules {
		if r.Clients.has(grpc) && r.Match.MatchService(svc) {
			if applied == nil {
				// One copy per call: c is shared with the other client
				// class, and with the caller.
				c = proto.Clone(c).(*clusterv3.Cluster)
			}
			c = r.apply(c)
			applied = append(applied, i)
		}
	}
	return c, applied
}

// field finds the field of md that a JSON or YAML key names.
func field(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByJSONName(key); fd != nil {
		return fd
	}
	return md.Fields().ByTextName(key)
}

// shape returns the cluster Envoy clients get and, when it differs, the one
// gRPC clients get (nil otherwise).
func shape(c *clusterv3.Cluster, svc sources.Service, s *Shaping) (envoy, grpc *clusterv3.Cluster) {
	envoy, er := s.Shape(c, svc, false)
	if !s.limited() {
		return envoy, nil
	}
	grpc, gr := s.Shape(c, svc, true)
	if slices.Equal(er, gr) {
		return envoy, nil
	}
	return envoy, grpc
}

// limited reports whether a rule is limited to one client class, so that
// the two classes may get different clusters.
func (s *Shaping) limited() bool {
	return s != nil && slices.ContainsFunc(s.Rules, func(r Rule) bool { return r.Clients != AllClients })
}
