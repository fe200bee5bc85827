package etcdtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"
)

// Registrar writes instances as the real registrar of each format does.
// Every write may carry a lease (clientv3.WithLease), as registrars tie
// instances to their liveness.
type Registrar struct {
	C *clientv3.Client
}

// GRPC registers addr as an instance of the gRPC naming target through
// gRPC-Go's own etcd endpoints manager, under the key target/addr (the
// key its examples use), with metadata md (any JSON value, or nil).
func (r Registrar) GRPC(ctx context.Context, target, addr string, md any, opts ...clientv3.OpOption) error {
	m, err := endpoints.NewManager(r.C, target)
	if err != nil {
		return err
	}
	return m.AddEndpoint(ctx, target+"/"+addr, endpoints.Endpoint{Addr: addr, Metadata: md}, opts...)
}

// GRPCDelete deregisters target/addr through the endpoints manager.
func (r Registrar) GRPCDelete(ctx context.Context, target, addr string) error {
	m, err := endpoints.NewManager(r.C, target)
	if err != nil {
		return err
	}
	return m.DeleteEndpoint(ctx, target+"/"+addr)
}

// SkyRecord is a record of CoreDNS's etcd plugin, with the JSON field
// names and omissions of its msg.Service.
type SkyRecord struct {
	Host        string `json:"host,omitempty"`
	Port        int    `json:"port,omitempty"`
	Priority    int    `json:"priority,omitempty"`
	Weight      int    `json:"weight,omitempty"`
	Text        string `json:"text,omitempty"`
	Mail        bool   `json:"mail,omitempty"`
	TTL         uint32 `json:"ttl,omitempty"`
	TargetStrip int    `json:"targetstrip,omitempty"`
	Group       string `json:"group,omitempty"`
}

// SkyKey is the key of the record for name (such as
// x1.web.example.local) under the plugin's path (such as /skydns): the
// labels reversed, /skydns/local/example/web/x1.
func SkyKey(path, name string) string {
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	slices.Reverse(labels)
	return strings.TrimSuffix(path, "/") + "/" + strings.Join(labels, "/")
}

// SkyDNS writes rec as the record for name under path.
func (r Registrar) SkyDNS(ctx context.Context, path, name string, rec SkyRecord, opts ...clientv3.OpOption) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = r.C.Put(ctx, SkyKey(path, name), string(b), opts...)
	return err
}

// JSON writes one instance in the file source's endpoint schema (address,
// port, weight, ...) under key.
func (r Registrar) JSON(ctx context.Context, key string, instance map[string]any, opts ...clientv3.OpOption) error {
	b, err := json.Marshal(instance)
	if err != nil {
		return err
	}
	_, err = r.C.Put(ctx, key, string(b), opts...)
	return err
}

// Raw writes value under key as it is: what a broken registrar writes.
func (r Registrar) Raw(ctx context.Context, key, value string, opts ...clientv3.OpOption) error {
	_, err := r.C.Put(ctx, key, value, opts...)
	return err
}

// Delete deletes key, or every key under it with clientv3.WithPrefix.
func (r Registrar) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) error {
	if _, err := r.C.Delete(ctx, key, opts...); err != nil {
		return fmt.Errorf("deleting %s: %w", key, err)
	}
	return nil
}
