package etcd

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

func TestParse(t *testing.T) {
	grpc := Entry{Prefix: "services/", Format: FormatGRPCNaming}
	sky := Entry{Prefix: "/skydns/local/example/", Format: FormatSkyDNS}
	js := Entry{Prefix: "instances/", Format: FormatJSON}
	named := Entry{Prefix: "/skydns/local/example/web/", Format: FormatSkyDNS, Cluster: "web"}
	ep := func(addr string, port, weight, prio uint32, md map[string]string) sources.Endpoint {
		return sources.Endpoint{Address: addr, Port: port, Weight: weight, Priority: prio, Health: sources.HealthHealthy, Metadata: md}
	}
	cases := []struct {
		name  string
		entry Entry
		key   string
		value string
		svc   string
		ep    sources.Endpoint
		err   string // a substring of the error; "skip" for errNotInstance
	}{
		{"grpc", grpc, "services/web/10.0.0.1:80", `{"Op":0,"Addr":"10.0.0.1:80","Metadata":null}`, "web", ep("10.0.0.1", 80, 1, 0, nil), ""},
		{"grpc nested target", grpc, "services/eu/web/x", `{"Addr":"[2001:db8::1]:80"}`, "eu/web", ep("2001:db8::1", 80, 1, 0, nil), ""},
		{"grpc lower-case fields as encoding/json reads them", grpc, "services/web/a", `{"addr":"10.0.0.1:80","metadata":{"version":"v1","w":3,"x":null}}`,
			"web", ep("10.0.0.1", 80, 1, 0, map[string]string{"version": "v1", "w": "3"}), ""},
		{"grpc string metadata", grpc, "services/web/a", `{"Addr":"10.0.0.1:80","Metadata":"zone-a"}`, "web", ep("10.0.0.1", 80, 1, 0, map[string]string{"metadata": "zone-a"}), ""},
		{"grpc list metadata", grpc, "services/web/a", `{"Addr":"10.0.0.1:80","Metadata":[1, 2]}`, "web", ep("10.0.0.1", 80, 1, 0, map[string]string{"metadata": "[1,2]"}), ""},
		{"grpc op ignored as the resolver does", grpc, "services/web/a", `{"Op":1,"Addr":"10.0.0.1:80"}`, "web", ep("10.0.0.1", 80, 1, 0, nil), ""},
		{"grpc key under the prefix itself", grpc, "services/10.0.0.1:80", `{"Addr":"10.0.0.1:80"}`, "services", ep("10.0.0.1", 80, 1, 0, nil), ""},
		{"grpc host name", grpc, "services/web/a", `{"Addr":"web-1.internal:80"}`, "", sources.Endpoint{}, "host name"},
		{"grpc no port", grpc, "services/web/a", `{"Addr":"10.0.0.1"}`, "", sources.Endpoint{}, "not ip:port"},
		{"grpc no addr", grpc, "services/web/a", `{"Op":0}`, "", sources.Endpoint{}, "no Addr"},
		{"grpc not json", grpc, "services/web/a", `10.0.0.1:80`, "", sources.Endpoint{}, "not a gRPC naming update"},
		{"grpc key ends with a slash", grpc, "services/web/", `{"Addr":"10.0.0.1:80"}`, "", sources.Endpoint{}, "ends with a slash"},
		{"grpc empty path element", grpc, "services//x", `{"Addr":"10.0.0.1:80"}`, "", sources.Endpoint{}, "empty element"},

		{"skydns", sky, "/skydns/local/example/web/x1", `{"host":"10.0.0.1","port":8080,"priority":10,"weight":5,"ttl":30}`,
			"web.example.local", ep("10.0.0.1", 8080, 5, 10, nil), ""},
		{"skydns weight 0 is unset", sky, "/skydns/local/example/web/x1", `{"host":"10.0.0.1","port":8080}`, "web.example.local", ep("10.0.0.1", 8080, 1, 0, nil), ""},
		{"skydns unknown fields ignored as CoreDNS does", sky, "/skydns/local/example/web/x1", `{"host":"10.0.0.1","port":80,"extra":true}`,
			"web.example.local", ep("10.0.0.1", 80, 1, 0, nil), ""},
		{"skydns cluster", named, "/skydns/local/example/web/a/b/x1", `{"host":"10.0.0.1","port":80}`, "web", ep("10.0.0.1", 80, 1, 0, nil), ""},
		{"skydns mail record", sky, "/skydns/local/example/mx/x1", `{"host":"10.0.0.1","port":25,"mail":true}`, "mx.example.local", sources.Endpoint{}, "skip"},
		{"skydns text record", sky, "/skydns/local/example/txt/x1", `{"text":"hello"}`, "txt.example.local", sources.Endpoint{}, "skip"},
		{"skydns host name", sky, "/skydns/local/example/web/x1", `{"host":"web.example.org","port":80}`, "", sources.Endpoint{}, "host name"},
		{"skydns no port", sky, "/skydns/local/example/web/x1", `{"host":"10.0.0.1"}`, "", sources.Endpoint{}, "no port"},
		{"skydns port too large", sky, "/skydns/local/example/web/x1", `{"host":"10.0.0.1","port":70000}`, "", sources.Endpoint{}, "outside 1..65535"},
		{"skydns negative weight", sky, "/skydns/local/example/web/x1", `{"host":"10.0.0.1","port":80,"weight":-1}`, "", sources.Endpoint{}, "weight -1"},
		{"skydns wrong type", sky, "/skydns/local/example/web/x1", `{"host":"10.0.0.1","port":"80"}`, "", sources.Endpoint{}, "not a SkyDNS record"},
		{"skydns record at the tld", Entry{Prefix: "/skydns/", Format: FormatSkyDNS}, "/skydns/local", `{"host":"10.0.0.1","port":80}`, "", sources.Endpoint{}, "names no domain"},

		{"json", js, "instances/web/i-1", `{"address":"10.0.0.1","port":8080,"weight":3,"priority":1,"health":"draining","metadata":{"version":"v1"},"locality":{"zone":"z1"}}`,
			"web", sources.Endpoint{Address: "10.0.0.1", Port: 8080, Weight: 3, Priority: 1, Health: sources.HealthDraining,
				Locality: sources.Locality{Zone: "z1"}, Metadata: map[string]string{"version": "v1"}}, ""},
		{"json unknown field", js, "instances/web/i-1", `{"address":"10.0.0.1","port":8080,"wieght":3}`, "", sources.Endpoint{}, "wieght: unknown field"},
		{"json host name", js, "instances/web/i-1", `{"address":"web","port":8080}`, "", sources.Endpoint{}, "not an IP address"},
		{"json empty", js, "instances/web/i-1", ``, "", sources.Endpoint{}, "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc, ep, err := tc.entry.parse(tc.key, []byte(tc.value))
			switch {
			case tc.err == "skip":
				if !errors.Is(err, errNotInstance) {
					t.Fatalf("error %v, want a record that is not an instance", err)
				}
				return
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if svc != tc.svc || !ep.Equal(tc.ep) || !maps.Equal(ep.Metadata, tc.ep.Metadata) {
				t.Errorf("got %q %+v, want %q %+v", svc, ep, tc.svc, tc.ep)
			}
		})
	}
}

// TestStateCountsEachRevisionOnce feeds the state a malformed key, reads
// it again at the same revision (a re-read) and at a new one: it is
// counted once per revision, and the note names it until it is fixed.
func TestStateCountsEachRevisionOnce(t *testing.T) {
	st := newState([]Entry{{Prefix: "s/", Format: FormatGRPCNaming}, {Prefix: "j/", Format: FormatJSON, Cluster: "jobs"}})
	full := st.full()
	if len(full.Services) != 1 || full.Services[0].Name != "jobs" || len(full.Services[0].Endpoints) != 0 {
		t.Fatalf("first state %+v, want the declared cluster jobs, empty", full)
	}
	good := kv{value: []byte(`{"Addr":"10.0.0.1:80"}`), modRev: 2}
	bad := kv{value: []byte(`{`), modRev: 3}
	if n := st.replace(map[string]kv{"s/web/a": good, "s/web/b": bad}); n != 1 {
		t.Errorf("first read: %d newly malformed, want 1", n)
	}
	if n := st.replace(map[string]kv{"s/web/a": good, "s/web/b": bad}); n != 0 {
		t.Errorf("re-read at the same revision: %d newly malformed, want 0", n)
	}
	if st.problems() == "" {
		t.Error("no note while a key is malformed")
	}
	if !st.put("s/web/b", []byte(`{"Addr":"x"}`), 4) {
		t.Error("a new malformed revision is not counted")
	}
	st.put("s/web/b", []byte(`{"Addr":"10.0.0.2:80"}`), 5)
	if st.problems() != "" {
		t.Errorf("note %q after the key was fixed", st.problems())
	}
	u := st.changes()
	if u == nil || len(u.Services) != 1 || len(u.Services[0].Endpoints) != 2 {
		t.Fatalf("changes %+v, want web with 2 endpoints", u)
	}
	if got := u.Services[0].Endpoints[0].Origin.Record; got != "key s/web/a (mod_revision 2)" {
		t.Errorf("provenance %q, want the key and its mod revision", got)
	}
	st.del("s/web/a")
	st.del("s/web/b")
	if u := st.changes(); u == nil || len(u.Removed) != 1 || u.Removed[0] != "web" {
		t.Errorf("changes %+v, want web removed with its last key", u)
	}
	if u := st.changes(); u != nil {
		t.Errorf("changes %+v with nothing changed, want none", u)
	}
}
