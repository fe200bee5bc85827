package zookeeper

import (
	"maps"
	"net/url"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

func TestParsers(t *testing.T) {
	dubboURL := url.QueryEscape("dubbo://10.0.0.7:20880/org.example.Greeter?anyhost=true&application=demo&group=blue&interface=org.example.Greeter&side=provider&version=1.2.0&weight=50")
	tests := []struct {
		name, format, znode string
		svc                 Service
		data                string
		want                sources.Endpoint
		err                 string
	}{
		{name: "curator", format: "curator", znode: "4b1e",
			data: `{"name":"web","id":"4b1e","address":"10.0.0.1","port":8080,"sslPort":null,"payload":{"@class":"x.Meta","zone":"a","n":3},"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":null,"enabled":true}`,
			want: sources.Endpoint{Address: "10.0.0.1", Port: 8080, Health: sources.HealthHealthy, Metadata: map[string]string{"id": "4b1e", "payload.zone": "a", "payload.n": "3"}}},
		{name: "curator ssl only", format: "curator", znode: "x",
			data: `{"name":"web","id":"x","address":"10.0.0.1","port":null,"sslPort":8443}`,
			want: sources.Endpoint{Address: "10.0.0.1", Port: 8443, Health: sources.HealthHealthy, Metadata: map[string]string{"id": "x", "tls": "true"}}},
		{name: "curator disabled", format: "curator", znode: "x",
			data: `{"id":"x","address":"10.0.0.1","port":80,"sslPort":443,"enabled":false}`,
			want: sources.Endpoint{Address: "10.0.0.1", Port: 80, Health: sources.HealthDraining, Metadata: map[string]string{"id": "x", "ssl_port": "443"}}},
		{name: "curator no port", format: "curator", znode: "x", data: `{"address":"10.0.0.1"}`, err: "neither port nor sslPort"},
		{name: "curator not JSON", format: "curator", znode: "x", data: `garbage`, err: "not the registrar's JSON"},
		{name: "serverset", format: "serverset", znode: "member_0000000001", svc: Service{},
			data: `{"serviceEndpoint":{"host":"10.0.0.2","port":31337},"additionalEndpoints":{"http":{"host":"10.0.0.2","port":8080}},"status":"ALIVE","shard":3}`,
			want: sources.Endpoint{Address: "10.0.0.2", Port: 31337, Health: sources.HealthHealthy, Metadata: map[string]string{"status": "ALIVE", "shard": "3"}}},
		{name: "serverset named endpoint", format: "serverset", znode: "member_1", svc: Service{Endpoint: "http"},
			data: `{"serviceEndpoint":{"host":"10.0.0.2","port":31337},"additionalEndpoints":{"http":{"host":"10.0.0.2","port":8080}},"status":"STOPPING"}`,
			want: sources.Endpoint{Address: "10.0.0.2", Port: 8080, Health: sources.HealthDraining, Metadata: map[string]string{"status": "STOPPING"}}},
		{name: "serverset missing named endpoint", format: "serverset", znode: "member_1", svc: Service{Endpoint: "admin"},
			data: `{"serviceEndpoint":{"host":"10.0.0.2","port":31337},"status":"ALIVE"}`, err: `no additional endpoint "admin"`},
		{name: "serverset unknown status", format: "serverset", znode: "member_1",
			data: `{"serviceEndpoint":{"host":"10.0.0.2","port":1},"status":"ZOMBIE"}`, err: "unknown status"},
		{name: "nerve", format: "nerve", znode: "i-1_web_0000000004",
			data: `{"host":"10.0.0.3","port":8080,"name":"i-1","weight":20,"haproxy_server_options":"backup","labels":{"az":"us-east-1a"}}`,
			want: sources.Endpoint{Address: "10.0.0.3", Port: 8080, Weight: 20, Health: sources.HealthHealthy, Metadata: map[string]string{"name": "i-1", "label.az": "us-east-1a"}}},
		{name: "nerve bad port", format: "nerve", znode: "x", data: `{"host":"10.0.0.3","port":70000}`, err: "outside 1..65535"},
		{name: "dubbo", format: "dubbo", znode: dubboURL,
			want: sources.Endpoint{Address: "10.0.0.7", Port: 20880, Weight: 50, Health: sources.HealthHealthy,
				Metadata: map[string]string{"protocol": "dubbo", "group": "blue", "version": "1.2.0", "side": "provider", "application": "demo", "weight": "50"}}},
		{name: "dubbo default weight, disabled", format: "dubbo", znode: url.QueryEscape("tri://10.0.0.8:50051/org.example.Greeter?side=provider&enabled=false"),
			want: sources.Endpoint{Address: "10.0.0.8", Port: 50051, Weight: 100, Health: sources.HealthDraining,
				Metadata: map[string]string{"protocol": "tri", "side": "provider"}}},
		{name: "dubbo not a URL", format: "dubbo", znode: "hello", err: "not a provider URL"},
		{name: "dubbo bad escape", format: "dubbo", znode: "dubbo%3", err: "not URL-encoded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := formats[tt.format].parse(&tt.svc, tt.znode, []byte(tt.data))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) || !maps.Equal(got.Metadata, tt.want.Metadata) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// fuzzParse checks what every parser promises on any input: no panic, and
// an endpoint only with a port in range.
func fuzzParse(t *testing.T, f string, name string, data []byte) {
	t.Helper()
	ep, err := formats[f].parse(&Service{Endpoint: "http"}, name, data)
	if err == nil && (ep.Port == 0 || ep.Port > 65535) {
		t.Fatalf("%s accepted port %d", f, ep.Port)
	}
}

func FuzzCurator(f *testing.F) {
	f.Add(`{"name":"web","id":"1","address":"10.0.0.1","port":8080,"sslPort":null,"payload":{"a":"b"}}`)
	f.Add(`{"address":"10.0.0.1","sslPort":1}`)
	f.Fuzz(func(t *testing.T, data string) { fuzzParse(t, "curator", "id", []byte(data)) })
}

func FuzzServerset(f *testing.F) {
	f.Add(`{"serviceEndpoint":{"host":"10.0.0.2","port":31337},"additionalEndpoints":{"http":{"host":"10.0.0.2","port":8080}},"status":"ALIVE","shard":0}`)
	f.Fuzz(func(t *testing.T, data string) { fuzzParse(t, "serverset", "member_0000000001", []byte(data)) })
}

func FuzzNerve(f *testing.F) {
	f.Add(`{"host":"10.0.0.3","port":8080,"name":"i-1","weight":20,"labels":{"az":"a"}}`)
	f.Fuzz(func(t *testing.T, data string) { fuzzParse(t, "nerve", "i-1_web_0000000001", []byte(data)) })
}

func FuzzDubbo(f *testing.F) {
	f.Add(url.QueryEscape("dubbo://10.0.0.7:20880/org.example.Greeter?group=a&version=1&weight=5&side=provider"))
	f.Add("dubbo%3A%2F%2F%5B%3A%3A1%5D%3A1%2F")
	f.Fuzz(func(t *testing.T, name string) { fuzzParse(t, "dubbo", name, nil) })
}
