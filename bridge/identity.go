package bridge

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/xdsbridge/xdsbridge/config"
)

// maxDeniedLogged bounds the set of refusals already logged: clients choose
// what they claim, so the set must not grow without bound. When it is full
// it starts over (a persistent offender is logged again, rarely).
const maxDeniedLogged = 1024

// identity binds the node a client claims to its verified certificate. It
// sits in front of the xDS services as a stream interceptor and looks at
// every request that carries a node (the first one of a stream always
// does); the engine never sees a request it refuses. A refusal ends the
// stream with PermissionDenied, is counted, and is logged once per
// (certificate identity, node) pair.
type identity struct {
	bindings []config.Binding
	log      *slog.Logger
	denied   prometheus.Counter

	mu     sync.Mutex
	logged map[string]struct{}
}

// newIdentity checks streams against bindings, counting refusals in denied.
func newIdentity(bindings []config.Binding, log *slog.Logger, denied prometheus.Counter) *identity {
	return &identity{bindings: bindings, log: log, denied: denied, logged: map[string]struct{}{}}
}

// stream is the grpc.StreamServerInterceptor.
func (id *identity) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	w := &checkedStream{ServerStream: ss, id: id, sans: peerSANs(ss)}
	err := handler(srv, w)
	if w.denial != nil {
		return w.denial
	}
	return err
}

// checkedStream checks the node of each request it receives.
type checkedStream struct {
	grpc.ServerStream
	id     *identity
	sans   []string
	last   *corev3.Node // the last node allowed, to skip repeats
	denial error
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	req, ok := m.(interface{ GetNode() *corev3.Node })
	if !ok {
		return nil
	}
	node := req.GetNode()
	if node == nil {
		if s.last != nil {
			return nil // later requests may leave the node out
		}
		// A first request without a node claims the empty one.
		node = &corev3.Node{}
	}
	if node == s.last ||
		(s.last != nil && node.GetId() == s.last.GetId() && node.GetCluster() == s.last.GetCluster()) {
		return nil
	}
	if !s.id.allows(s.sans, node.GetId(), node.GetCluster()) {
		s.denial = s.id.deny(s.ServerStream, s.sans, node)
		return s.denial
	}
	s.last = node
	return nil
}

// allows reports whether some binding lets a certificate with sans claim
// the node (nodeID, cluster).
func (id *identity) allows(sans []string, nodeID, cluster string) bool {
	for _, b := range id.bindings {
		for _, san := range sans {
			caps, ok := match(b.Peer, san)
			if !ok {
				continue
			}
			if matchExpanded(b.NodeID, caps, nodeID) && matchExpanded(b.NodeCluster, caps, cluster) {
				return true
			}
		}
	}
	return false
}

// deny counts a refusal, logs it unless this pair was logged already, and
// returns the status the stream ends with.
func (id *identity) deny(ss grpc.ServerStream, sans []string, node *corev3.Node) error {
	id.denied.Inc()
	who := strings.Join(sans, ",")
	if who == "" {
		who = "no verified client certificate"
	}
	key := who + "\x00" + node.GetId() + "\x00" + node.GetCluster()
	id.mu.Lock()
	_, seen := id.logged[key]
	if !seen {
		if len(id.logged) >= maxDeniedLogged {
			id.logged = map[string]struct{}{}
		}
		id.logged[key] = struct{}{}
	}
	id.mu.Unlock()
	if !seen {
		addr := ""
		if p, ok := peer.FromContext(ss.Context()); ok {
			addr = p.Addr.String()
		}
		id.log.Warn("refusing an xDS stream: the node is not bound to the client certificate",
			"peer", addr, "sans", who, "node_id", node.GetId(), "node_cluster", node.GetCluster())
	}
	return status.Error(codes.PermissionDenied,
		fmt.Sprintf("node id %q, cluster %q is not allowed for this client certificate", node.GetId(), node.GetCluster()))
}

// peerSANs returns the subject alternative names of the stream's verified
// client certificate: URIs (SPIFFE IDs), DNS names, IP addresses and email
// addresses. An unverified or absent certificate has none.
func peerSANs(ss grpc.ServerStream) []string {
	p, ok := peer.FromContext(ss.Context())
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return sans(info.State.VerifiedChains[0][0])
}

func sans(c *x509.Certificate) []string {
	var out []string
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	out = append(out, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return append(out, c.EmailAddresses...)
}

// match matches s against pattern, in which `*` matches any run of
// characters, and returns what each `*` matched. The leftmost-shortest
// assignment wins, so the result is deterministic.
func match(pattern, s string) ([]string, bool) {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return nil, pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return nil, false
	}
	rest, s := pattern[star+1:], s[star:]
	for i := 0; i <= len(s); i++ {
		if caps, ok := match(rest, s[i:]); ok {
			return append([]string{s[:i]}, caps...), true
		}
	}
	return nil, false
}

// matchExpanded reports whether s matches pattern once $1, $2, ... in it
// are replaced by caps[0], caps[1], ...; an empty pattern matches anything.
// Captured text is literal: one holding a `*` would widen the pattern, so
// it matches nothing.
func matchExpanded(pattern string, caps []string, s string) bool {
	if pattern == "" {
		return true
	}
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		j := i + 1
		for j < len(pattern) && pattern[j] >= '0' && pattern[j] <= '9' {
			j++
		}
		if pattern[i] != '$' || j == i+1 {
			b.WriteByte(pattern[i])
			continue
		}
		n, _ := strconv.Atoi(pattern[i+1 : j])
		if n >= 1 && n <= len(caps) {
			if strings.Contains(caps[n-1], "*") {
				return false
			}
			b.WriteString(caps[n-1])
		}
		i = j - 1
	}
	_, ok := match(b.String(), s)
	return ok
}
