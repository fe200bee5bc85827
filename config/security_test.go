package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
