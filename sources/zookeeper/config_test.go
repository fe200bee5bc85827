package zookeeper

import (
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

func TestConfig(t *testing.T) {
	svc := []any{map[string]any{"path": "/services", "format": "curator"}}
	tests := []struct {
		name string
		cfg  map[string]any
		err  string // "" for valid
	}{
		{"minimal", map[string]any{"servers": []any{"127.0.0.1"}, "services": svc}, ""},
		{"no servers", map[string]any{"services": svc}, "servers: is required"},
		{"bad server", map[string]any{"servers": []any{"a:b:c"}, "services": svc}, "servers[0]"},
		{"bad port", map[string]any{"servers": []any{"zk:0"}, "services": svc}, "servers[0]"},
		{"unknown key", map[string]any{"servers": []any{"zk"}, "services": svc, "sesion_timeout": "1s"}, "sesion_timeout"},
		{"no services", map[string]any{"servers": []any{"zk"}}, "services: is required"},
		{"bad chroot", map[string]any{"servers": []any{"zk"}, "chroot": "prod", "services": svc}, "chroot"},
		{"session timeout", map[string]any{"servers": []any{"zk"}, "session_timeout": "10ms", "services": svc}, "session_timeout"},
		{"retry", map[string]any{"servers": []any{"zk"}, "retry_min": "2s", "retry_max": "1s", "services": svc}, "retry_max"},
		{"auth half", map[string]any{"servers": []any{"zk"}, "auth": map[string]any{"user": "u"}, "services": svc}, "auth.password_file"},
		{"tls half", map[string]any{"servers": []any{"zk"}, "tls": map[string]any{"key_file": "k"}, "services": svc}, "tls.cert_file"},
		{"unknown format", map[string]any{"servers": []any{"zk"}, "services": []any{map[string]any{"path": "/x", "format": "eureka"}}}, "services[0].format"},
		{"no format", map[string]any{"servers": []any{"zk"}, "services": []any{map[string]any{"path": "/x"}}}, "services[0].format: is required"},
		{"relative path", map[string]any{"servers": []any{"zk"}, "services": []any{map[string]any{"path": "x", "format": "nerve"}}}, "services[0].path"},
		{"trailing slash", map[string]any{"servers": []any{"zk"}, "services": []any{map[string]any{"path": "/x/", "format": "nerve"}}}, "services[0].path"},
		{"cluster on a tree", map[string]any{"servers": []any{"zk"}, "services": []any{map[string]any{"path": "/x", "format": "dubbo", "cluster": "c"}}}, "services[0].cluster"},
		{"endpoint not serverset", map[string]any{"servers": []any{"zk"}, "services": []any{map[string]any{"path": "/x", "format": "nerve", "endpoint": "http"}}}, "services[0].endpoint"},
		{"overlap", map[string]any{"servers": []any{"zk"}, "services": []any{
			map[string]any{"path": "/services", "format": "curator"}, map[string]any{"path": "/services/web", "format": "nerve"}}}, "services[1].path"},
		{"same cluster", map[string]any{"servers": []any{"zk"}, "services": []any{
			map[string]any{"path": "/a/web", "format": "nerve"}, map[string]any{"path": "/b/web", "format": "serverset"}}}, "services[1].cluster"},
		{"unknown entry key", map[string]any{"servers": []any{"zk"}, "services": []any{map[string]any{"path": "/x", "format": "nerve", "zk_path": "/y"}}}, "zk_path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, sources.Options{})
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("err = %v, want one naming %q", err, tt.err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	s, err := New(map[string]any{"servers": []any{"zk", "[::1]:2182"}, "chroot": "/prod", "services": []any{
		map[string]any{"path": "/aurora/role/prod/hello", "format": "serverset"}}}, sources.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := s.cfg
	if c.Servers[0] != "zk:2181" || c.Servers[1] != "[::1]:2182" || c.SessionTimeout != DefaultSessionTimeout ||
		c.RetryMin != DefaultRetryMin || c.RetryMax != DefaultRetryMax || c.Services[0].Cluster != "hello" ||
		c.znode(c.Services[0].Path) != "/prod/aurora/role/prod/hello" {
		t.Fatalf("defaults not applied: %+v", c)
	}
}
