package zktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Registrar registers instances the way the discovery systems' own
// registrars do, on a session of its own: ephemeral znodes (sequential
// where the registrar's are) holding exactly the registrar's encoding, under
// persistent parents. Cut takes its network away so that the server
// expires its session (and its znodes vanish), Restore gives it back, and
// Reregister registers again what the session held, as Curator, Finagle,
// Nerve and Dubbo do on a new session.
type Registrar struct {
	t    testing.TB
	Conn *zk.Conn

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
	regs  map[string]registration // by znode path
}

type registration struct {
	path string // the znode's path, or its prefix when sequential
	data []byte
	seq  bool
}

// NewRegistrar connects a registrar with the given session timeout and
// waits for its session; it is closed when the test ends.
func NewRegistrar(t testing.TB, addr string, sessionTimeout time.Duration) *Registrar {
	t.Helper()
	r := &Registrar{t: t, regs: map[string]registration{}}
	c, _, err := zk.Connect([]string{addr}, sessionTimeout, zk.WithDialer(r.dial), zk.WithLogInfo(false),
		zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	r.Conn = c
	t.Cleanup(c.Close)
	r.waitSession()
	return r
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func (r *Registrar) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut {
		return nil, errors.New("registrar cut off")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		r.conns = append(r.conns, c)
	}
	return c, err
}

func (r *Registrar) waitSession() {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for r.Conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			r.t.Fatal("registrar: no session within 60s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Cut closes the registrar's connection and refuses new ones: after its
// session timeout the server expires the session.
func (r *Registrar) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// Restore lets the registrar connect again; an expired session is
// replaced by a new one, empty.
func (r *Registrar) Restore() {
	r.mu.Lock()
	r.cut = false
	r.mu.Unlock()
}

// Reregister waits for a session and registers again everything this
// registrar registered and did not delete. It returns the znodes' paths,
// old to new (a sequential znode gets a new name).
func (r *Registrar) Reregister() map[string]string {
	r.t.Helper()
	r.waitSession()
	r.mu.Lock()
	old := r.regs
	r.regs = map[string]registration{}
	r.mu.Unlock()
	moved := map[string]string{}
	for p, reg := range old {
		if ok, _, _ := r.Conn.Exists(p); ok {
			r.regs[p] = reg
			moved[p] = p
			continue
		}
		moved[p] = r.create(reg)
	}
	return moved
}

// create makes reg's persistent parents and its ephemeral znode.
func (r *Registrar) create(reg registration) string {
	r.t.Helper()
	r.ensure(path.Dir(reg.path))
	flags := int32(zk.FlagEphemeral)
	if reg.seq {
		flags = zk.FlagEphemeralSequential
	}
	p, err := r.Conn.Create(reg.path, reg.data, flags, zk.WorldACL(zk.PermAll))
	if err != nil {
		r.t.Fatalf("registrar: creating %s: %v", reg.path, err)
	}
	r.mu.Lock()
	r.regs[p] = reg
	r.mu.Unlock()
	return p
}

// ensure creates dir and its parents, persistent, where missing.
func (r *Registrar) ensure(dir string) {
	r.t.Helper()
	var p strings.Builder
	for el := range strings.SplitSeq(strings.TrimPrefix(dir, "/"), "/") {
		if el == "" {
			continue
		}
		p.WriteString("/" + el)
		_, err := r.Conn.Create(p.String(), nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			r.t.Fatalf("registrar: creating %s: %v", p.String(), err)
		}
	}
}

// Set replaces a znode's data (as Curator's updateService does).
func (r *Registrar) Set(p string, data []byte) {
	r.t.Helper()
	if _, err := r.Conn.Set(p, data, -1); err != nil {
		r.t.Fatalf("registrar: setting %s: %v", p, err)
	}
	r.mu.Lock()
	if reg, ok := r.regs[p]; ok {
		reg.data = data
		r.regs[p] = reg
	}
	r.mu.Unlock()
}

// Delete removes a znode and, recursively, its children (a deregistration,
// or a whole service removed).
func (r *Registrar) Delete(p string) {
	r.t.Helper()
	children, _, err := r.Conn.Children(p)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		r.t.Fatalf("registrar: listing %s: %v", p, err)
	}
	for _, c := range children {
		r.Delete(p + "/" + c)
	}
	if err := r.Conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		r.t.Fatalf("registrar: deleting %s: %v", p, err)
	}
	r.mu.Lock()
	delete(r.regs, p)
	r.mu.Unlock()
}

// Raw creates an ephemeral znode holding anything (malformed data).
func (r *Registrar) Raw(p string, data []byte) string {
	return r.create(registration{path: p, data: data})
}

// CuratorInstance is Curator's ServiceInstance, field for field as its
// JsonInstanceSerializer writes it.
func CuratorInstance(service, id, address string, port int) []byte {
	b, _ := json.Marshal(struct {
		Name                string          `json:"name"`
		ID                  string          `json:"id"`
		Address             string          `json:"address"`
		Port                *int            `json:"port"`
		SSLPort             *int            `json:"sslPort"`
		Payload             json.RawMessage `json:"payload"`
		RegistrationTimeUTC int64           `json:"registrationTimeUTC"`
		ServiceType         string          `json:"serviceType"`
		URISpec             json.RawMessage `json:"uriSpec"`
		Enabled             bool            `json:"enabled"`
	}{service, id, address, &port, nil, json.RawMessage("null"), time.Now().UnixMilli(), "DYNAMIC", json.RawMessage("null"), true})
	return b
}

// Curator registers an instance as Curator's ServiceDiscovery does: an
// ephemeral /<base>/<service>/<id>.
func (r *Registrar) Curator(base, service, id, address string, port int) string {
	return r.create(registration{path: base + "/" + service + "/" + id, data: CuratorInstance(service, id, address, port)})
}

// Endpoint is one endpoint of a serverset member.
type Endpoint struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

// ServersetMember is a Finagle/Aurora serverset member's JSON.
func ServersetMember(service Endpoint, additional map[string]Endpoint, status string, shard int) []byte {
	b, _ := json.Marshal(struct {
		ServiceEndpoint     Endpoint            `json:"serviceEndpoint"`
		AdditionalEndpoints map[string]Endpoint `json:"additionalEndpoints"`
		Status              string              `json:"status"`
		Shard               int                 `json:"shard"`
	}{service, additional, status, shard})
	return b
}

// Serverset announces a member as Finagle's ZkAnnouncer and Aurora's
// executor do: an ephemeral sequential <path>/member_NNNNNNNNNN.
func (r *Registrar) Serverset(p string, service Endpoint, additional map[string]Endpoint, status string, shard int) string {
	return r.create(registration{path: p + "/member_", data: ServersetMember(service, additional, status, shard), seq: true})
}

// NerveInstance is what Nerve's ZooKeeper reporter writes.
func NerveInstance(host string, port int, name string, weight int, labels map[string]string) []byte {
	b, _ := json.Marshal(struct {
		Host   string            `json:"host"`
		Port   int               `json:"port"`
		Name   string            `json:"name"`
		Weight int               `json:"weight,omitempty"`
		Labels map[string]string `json:"labels,omitempty"`
	}{host, port, name, weight, labels})
	return b
}

// Nerve reports an instance as Nerve does: an ephemeral sequential
// <zk_path>/<instance>_<service>_NNNNNNNNNN.
func (r *Registrar) Nerve(zkPath, instance, service, host string, port, weight int, labels map[string]string) string {
	return r.create(registration{path: fmt.Sprintf("%s/%s_%s_", zkPath, instance, service),
		data: NerveInstance(host, port, instance, weight, labels), seq: true})
}

// DubboURL is a provider URL as Dubbo writes it, before encoding.
func DubboURL(protocol, ip string, port int, iface string, params url.Values) string {
	return fmt.Sprintf("%s://%s/%s?%s", protocol, net.JoinHostPort(ip, fmt.Sprint(port)), iface, params.Encode())
}

// Dubbo registers a provider as Dubbo's ZooKeeper registry does: an
// ephemeral znode without data under /<root>/<interface>/providers, named
// by the URL-encoded provider URL.
func (r *Registrar) Dubbo(root, iface, ip string, port int, params url.Values) string {
	return r.create(registration{path: root + "/" + iface + "/providers/" + url.QueryEscape(DubboURL("dubbo", ip, port, iface, params))})
}
