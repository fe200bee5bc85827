package etcd

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources/file"
)

// checkParsed holds what every format promises of a key it accepts: a
// named service and an instance with an IP address, a port and a weight.
func checkParsed(t *testing.T, e Entry, key string, value []byte) {
	t.Helper()
	svc, ep, err := e.parse(key, value)
	if err != nil {
		if errors.Is(err, errNotInstance) && svc == "" {
			t.Fatalf("a record that is not an instance must still name its service (key %q)", key)
		}
		return
	}
	if svc == "" {
		t.Fatalf("key %q accepted without a service", key)
	}
	if _, perr := netip.ParseAddr(ep.Address); perr != nil || ep.Port < 1 || ep.Port > 65535 || ep.Weight < 1 {
		t.Fatalf("key %q value %q accepted as %+v", key, value, ep)
	}
}

// FuzzGRPCNaming feeds arbitrary keys and values to the grpc-naming
// format. In CI:
//
//	go test -run='^$' -fuzz='^FuzzGRPCNaming$' -fuzztime=10s ./sources/etcd/
func FuzzGRPCNaming(f *testing.F) {
	for _, s := range []struct{ key, value string }{
		{"services/web/10.0.0.1:80", `{"Op":0,"Addr":"10.0.0.1:80","Metadata":null}`},
		{"services/eu/web/x", `{"addr":"[::1]:8080","metadata":{"version":"v1","w":3}}`},
		{"services/web/", `{"Addr":"10.0.0.1:80","Metadata":"zone"}`},
		{"services/x", `{"Addr":"host:80","Metadata":[1,{"a":null}]}`},
	} {
		f.Add(s.key, []byte(s.value))
	}
	e := Entry{Prefix: "services/", Format: FormatGRPCNaming}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		checkParsed(t, e, e.Prefix+key, value)
	})
}

// FuzzSkyDNS feeds arbitrary keys and values to the skydns format. In CI:
//
//	go test -run='^$' -fuzz='^FuzzSkyDNS$' -fuzztime=10s ./sources/etcd/
func FuzzSkyDNS(f *testing.F) {
	for _, s := range []struct{ key, value string }{
		{"/skydns/local/example/web/x1", `{"host":"10.0.0.1","port":8080,"priority":10,"weight":5,"ttl":30}`},
		{"/skydns/local/example/mx/x1", `{"host":"10.0.0.1","mail":true}`},
		{"/skydns/local//x1", `{"text":"t"}`},
		{"/skydns/local", `{"host":"::1","port":-1,"weight":70000}`},
	} {
		f.Add(s.key, []byte(s.value))
	}
	e := Entry{Prefix: "/skydns/", Format: FormatSkyDNS}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		checkParsed(t, e, e.Prefix+key, value)
	})
}

// FuzzJSON feeds arbitrary values to the json format, which must read an
// instance exactly as the file source reads the same object in a
// document's endpoints. In CI:
//
//	go test -run='^$' -fuzz='^FuzzJSON$' -fuzztime=10s ./sources/etcd/
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"address":"10.0.0.1","port":8080,"weight":3,"priority":1,"health":"draining","metadata":{"v":"1"},"locality":{"zone":"z"}}`,
		`{"address":"10.0.0.1","port":0}`,
		`{"address":"web","port":80,"extra":1}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	e := Entry{Prefix: "instances/", Format: FormatJSON}
	f.Fuzz(func(t *testing.T, value []byte) {
		checkParsed(t, e, "instances/web/i-1", value)
		_, ep, err := e.parse("instances/web/i-1", value)
		doc := append(append([]byte(`{"services":[{"name":"web","endpoints":[`), value...), "]}]}"...)
		svcs, ferr := file.Parse(doc, true)
		if err == nil && ferr == nil && (len(svcs[0].Endpoints) != 1 || !svcs[0].Endpoints[0].Equal(ep)) {
			t.Fatalf("value %q read as %+v, the file source reads %+v", value, ep, svcs[0].Endpoints)
		}
		if err == nil && ferr != nil {
			t.Fatalf("value %q accepted, the file source rejects it in a document: %v", value, ferr)
		}
	})
}
