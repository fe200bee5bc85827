package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

func TestSecurityInvalid(t *testing.T) {
	cases := []struct {
		name, yaml, wantKey, wantMsg string
	}{
		{"key without cert", "xds: {tls: {key_file: k}}\n" + minimal, "xds.tls.cert_file", "is required"},
		{"cert without key", "admin: {tls: {cert_file: c}}\n" + minimal, "admin.tls.key_file", "is required"},
		{"client ca without tls", "xds: {tls: {client_ca_file: ca}}\n" + minimal, "xds.tls.cert_file", "client certificates"},
		{"require without ca", "xds: {tls: {cert_file: c, key_file: k, require_client_cert: true}}\n" + minimal,
			"xds.tls.client_ca_file", "require_client_cert"},
		{"identity without ca", "xds: {identity: [{peer: 'spiffe://x/*', node_id: '$1'}]}\n" + minimal,
			"xds.identity", "client_ca_file"},
		{"identity without peer", "xds: {tls: {cert_file: c, key_file: k, client_ca_file: ca}, identity: [{node_id: a}]}\n" + minimal,
			"xds.identity[0].peer", "is required"},
		{"identity bad ref", "xds: {tls: {cert_file: c, key_file: k, client_ca_file: ca}, identity: [{peer: 'a/*', node_cluster: '$2'}]}\n" + minimal,
			"xds.identity[0].node_cluster", "$2 refers past"},
		{"identity unknown key", "xds: {identity: [{peer: a, node: b}]}\n" + minimal, "xds.identity[0].node", "unknown key"},
		{"negative max age", "xds: {keepalive: {max_connection_age: -1s}}\n" + minimal, "xds.keepalive.max_connection_age", "negative"},
		{"bad pprof", "admin: {pprof: maybe}\n" + minimal, "admin.pprof", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse([]byte(c.yaml), "/d", nil)
			var ke *sources.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("error = %v, want a *sources.KeyError", err)
			}
			if ke.Key != c.wantKey || !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("error = %q, want key %q and %q", err, c.wantKey, c.wantMsg)
			}
		})
	}
}

// TestSecurityFiles checks relative file settings resolve against the
// configuration's directory and that Check names each missing one.
func TestSecurityFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parse([]byte(`
xds: {tls: {cert_file: cert.pem, key_file: key.pem}}
admin: {token_file: /nonexistent/token, pprof: true}
`+minimal), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.XDS.TLS.CertFile != filepath.Join(dir, "cert.pem") || !cfg.Admin.PProf {
		t.Errorf("config = %+v", cfg)
	}
	var got []string
	for _, p := range cfg.Check() {
		got = append(got, p.Key)
	}
	if strings.Join(got, ",") != "xds.tls.key_file,admin.token_file" {
		t.Errorf("problems at %v, want xds.tls.key_file and admin.token_file", got)
	}
}

func TestSecretFileFromEnv(t *testing.T) {
	t.Setenv("BRIDGE_ADMIN_TOKEN_FILE", "/run/secrets/admin")
	cfg, err := parse([]byte(minimal), "/d", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.TokenFile != "/run/secrets/admin" {
		t.Errorf("admin.token_file = %q", cfg.Admin.TokenFile)
	}
}
