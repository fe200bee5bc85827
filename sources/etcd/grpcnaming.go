package etcd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/xdsbridge/xdsbridge/sources"
)

// metaGRPC is the metadata key of a gRPC endpoint's Metadata when it is
// not a JSON object (a string, a number, a list).
const metaGRPC = "metadata"

// grpcNamingEndpoint reads a value written by gRPC-Go's etcd endpoints
// manager. It reads as gRPC's own etcd resolver does: encoding/json, so
// field names match regardless of case and unknown fields are ignored,
// and every value is an instance whatever its Op (the resolver ignores
// it; deleting the key is how an instance is removed).
//
// Metadata, free-form in gRPC, becomes endpoint metadata: a JSON object's
// members by name (strings as they are, other values as JSON text), any
// other value as JSON text under the key "metadata".
func grpcNamingEndpoint(value []byte) (sources.Endpoint, error) {
	var v struct {
		Addr     string
		Metadata json.RawMessage
	}
	if err := json.Unmarshal(value, &v); err != nil {
		return sources.Endpoint{}, fmt.Errorf("not a gRPC naming update: %w", err)
	}
	if v.Addr == "" {
		return sources.Endpoint{}, fmt.Errorf("not a gRPC naming update: no Addr")
	}
	ep, err := hostPort(v.Addr)
	if err != nil {
		return ep, err
	}
	ep.Metadata, err = grpcMetadata(v.Metadata)
	return ep, err
}

func grpcMetadata(raw json.RawMessage) (map[string]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var members map[string]json.RawMessage
	if raw[0] != '{' {
		return map[string]string{metaGRPC: scalarText(raw)}, nil
	}
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	md := make(map[string]string, len(members))
	for k, v := range maps.All(members) {
		if v = bytes.TrimSpace(v); !bytes.Equal(v, []byte("null")) {
			md[k] = scalarText(v)
		}
	}
	return md, nil
}

// scalarText is a JSON string's text, or any other value's compact JSON.
func scalarText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}
