package translate

import (
	"encoding/binary"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/sources"
)

// fuzzService builds a service from fuzz bytes: 12 bytes per endpoint
// (address, port, weight, priority and health packed), so that the fuzzer
// reaches duplicates, huge weights, sparse priorities and every health.
func fuzzService(name string, b []byte) sources.Service {
	svc := sources.Service{Name: name}
	for ; len(b) >= 12; b = b[12:] {
		addr := fmt.Sprintf("10.0.%d.%d", b[0]%4, b[1]%4)
		if b[0]&0x80 != 0 {
			addr = fmt.Sprintf("2001:db8::%x", b[1])
		}
		svc.Endpoints = append(svc.Endpoints, sources.Endpoint{
			Address:  addr,
			Port:     uint32(binary.BigEndian.Uint16(b[2:4])),
			Weight:   binary.BigEndian.Uint32(b[4:8]),
			Priority: uint32(b[8] % 8),
			Health:   sources.Health(b[9] % 6),
			Locality: sources.Locality{Zone: string(rune('a' + b[10]%3))},
			Metadata: map[string]string{"k": string(rune('a' + b[11]%2))},
		})
	}
	return svc
}

// FuzzService translates arbitrary services: translation never panics, an
// accepted service yields resources that pass validation, and translating
// the same service with its endpoints in another order yields the same
// resources (translation is deterministic).
//
// `make fuzz` (part of `make test`) runs it with the other fuzz targets;
// to run it alone:
//
//	go test -run='^$' -fuzz='^FuzzService$' -fuzztime=10s ./translate/
func FuzzService(f *testing.F) {
	f.Add("web", []byte{0, 1, 0x1f, 0x90, 0, 0, 0, 1, 0, 1, 0, 0}, true)
	f.Add("a", []byte{0, 1, 0, 80, 0xff, 0xff, 0xff, 0xff, 3, 1, 1, 1, 0, 1, 0, 80, 0xff, 0xff, 0xff, 0xff, 0, 1, 2, 0}, false)
	f.Add("", []byte{}, true)
	f.Add("x/y:z", []byte{0x80, 1, 0, 0, 0, 0, 0, 0, 7, 5, 0, 0}, true)
	f.Fuzz(func(t *testing.T, name string, b []byte, grpc bool) {
		svc := fuzzService(name, b)
		opts := Options{GRPC: grpc}
		r, err := Service(svc, opts)
		if err != nil {
			return
		}
		if r.Cluster == nil || r.Assignment == nil || (grpc && (r.Listener == nil || r.Route == nil)) {
			t.Fatalf("incomplete resources %+v", r)
		}
		rev := svc.Clone()
		for i, j := 0, len(rev.Endpoints)-1; i < j; i, j = i+1, j-1 {
			rev.Endpoints[i], rev.Endpoints[j] = rev.Endpoints[j], rev.Endpoints[i]
		}
		r2, err := Service(rev, opts)
		if err != nil {
			t.Fatalf("reordered endpoints fail: %v", err)
		}
		if !proto.Equal(r.Assignment, r2.Assignment) || !proto.Equal(r.Cluster, r2.Cluster) {
			t.Fatalf("endpoint order changes the output:\n%v\n%v", r.Assignment, r2.Assignment)
		}
	})
}
