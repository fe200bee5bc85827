package config

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// TLS configures a listener's TLS. With CertFile and KeyFile empty the
// listener is plaintext. The files are re-read when they change, so a
// rotated certificate is used by the next handshake without a restart.
type TLS struct {
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ClientCAFile holds the CAs that client certificates are verified
	// against; empty accepts no client certificate.
	ClientCAFile string `mapstructure:"client_ca_file"`
	// RequireClientCert refuses a handshake without a client certificate
	// that verifies against ClientCAFile (mutual TLS). Without it a
	// client certificate is verified when one is presented.
	RequireClientCert bool `mapstructure:"require_client_cert"`
}

// Enabled reports whether the listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Binding ties client certificates to the nodes they may claim: a client
// whose verified certificate has a SAN (URI, such as a SPIFFE ID, DNS name
// or IP address) matching Peer may open xDS streams as a node whose id
// matches NodeID and whose cluster matches NodeCluster.
//
// Patterns are literal text in which `*` matches any run of characters
// (including none and `/`). In NodeID and NodeCluster, `$1`, `$2`, ... stand
// for what the first, second, ... `*` of Peer matched, so one binding
// `{peer: "spiffe://example.org/node/*", node_id: "$1"}` lets every
// workload claim only its own name.
type Binding struct {
	Peer        string `mapstructure:"peer"`
	NodeID      string `mapstructure:"node_id"`
	NodeCluster string `mapstructure:"node_cluster"`
}

// fileKeys returns the keys of the TLS files that are set, with their
// values, in a fixed order.
func (t TLS) fileKeys(prefix string) [][2]string {
	var out [][2]string
	for _, f := range [][2]string{
		{"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"client_ca_file", t.ClientCAFile},
	} {
		if f[1] != "" {
			out = append(out, [2]string{prefix + "." + f[0], f[1]})
		}
	}
	return out
}

// validate checks that a TLS block is complete; it does no I/O.
func (t TLS) validate(prefix string) error {
	switch {
	case t.CertFile == "" && t.KeyFile != "":
		return settings.Errorf(prefix+".cert_file", "is required with %s.key_file", prefix)
	case t.CertFile != "" && t.KeyFile == "":
		return settings.Errorf(prefix+".key_file", "is required with %s.cert_file", prefix)
	case !t.Enabled() && (t.ClientCAFile != "" || t.RequireClientCert):
		return settings.Errorf(prefix+".cert_file", "is required for client certificates (client_ca_file, require_client_cert)")
	case t.RequireClientCert && t.ClientCAFile == "":
		return settings.Errorf(prefix+".client_ca_file", "is required with require_client_cert")
	}
	return nil
}

// validateSecurity checks the TLS, identity and admin settings.
func (c *Config) validateSecurity() error {
	if err := c.XDS.TLS.validate("xds.tls"); err != nil {
		return err
	}
	if err := c.Admin.TLS.validate("admin.tls"); err != nil {
		return err
	}
	if len(c.XDS.Identity) > 0 && c.XDS.TLS.ClientCAFile == "" {
		return settings.Errorf("xds.identity", "needs client certificates: set xds.tls.client_ca_file")
	}
	for i, b := range c.XDS.Identity {
		key := fmt.Sprintf("xds.identity[%d]", i)
		if b.Peer == "" {
			return settings.Errorf(key+".peer", "is required")
		}
		n := strings.Count(b.Peer, "*")
		for _, f := range [][2]string{{"node_id", b.NodeID}, {"node_cluster", b.NodeCluster}} {
			if ref := maxRef(f[1]); ref > n {
				return settings.Errorf(key+"."+f[0], "$%d refers past the %d wildcard(s) of peer %q", ref, n, b.Peer)
			}
		}
	}
	if c.XDS.Keepalive.MaxConnectionAge < 0 {
		return settings.Errorf("xds.keepalive.max_connection_age", "must not be negative")
	}
	if c.XDS.Keepalive.MaxConnectionAgeGrace < 0 {
		return settings.Errorf("xds.keepalive.max_connection_age_grace", "must not be negative")
	}
	return nil
}

// maxRef returns the highest $N in pattern, 0 if none.
func maxRef(pattern string) int {
	hi := 0
	for i := 0; i < len(pattern)-1; i++ {
		if pattern[i] != '$' {
			continue
		}
		n := 0
		for j := i + 1; j < len(pattern) && pattern[j] >= '0' && pattern[j] <= '9'; j++ {
			n = n*10 + int(pattern[j]-'0')
		}
		hi = max(hi, n)
	}
	return hi
}

// resolve makes a relative path relative to the configuration file's
// directory, as source paths are.
func (c *Config) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Dir, p)
}

// resolvePaths makes the file settings of the listeners absolute.
func (c *Config) resolvePaths() {
	for _, t := range []*TLS{&c.XDS.TLS, &c.Admin.TLS} {
		t.CertFile, t.KeyFile, t.ClientCAFile = c.resolve(t.CertFile), c.resolve(t.KeyFile), c.resolve(t.ClientCAFile)
	}
	c.Admin.TokenFile = c.resolve(c.Admin.TokenFile)
}

// Check checks what `bridge validate` can check beyond Validate without
// starting anything: the files the listeners read (an error each: the
// bridge reads them at startup) and whatever each source's Checker reports,
// prefixed with the entry's key. Each problem names where its value came
// from (the file, or a flag or environment variable); the Warnings come
// last.
func (c *Config) Check() []sources.Problem {
	var out []sources.Problem
	keys := append(c.XDS.TLS.fileKeys("xds.tls"), c.Admin.TLS.fileKeys("admin.tls")...)
	if c.Admin.TokenFile != "" {
		keys = append(keys, [2]string{"admin.token_file", c.Admin.TokenFile})
	}
	for _, k := range keys {
		if err := sources.Readable(k[1]); err != nil {
			out = append(out, sources.Problem{Key: k[0], Err: err, Origin: c.originOf(k[0])})
		}
	}
	out = append(out, c.checkEnvoyFiles()...)
	for _, e := range c.Entries {
		src, err := c.NewSource(e, sources.Options{Logger: slog.New(slog.DiscardHandler), Status: sources.NewStatus(e.Name)})
		if err != nil {
			out = append(out, sources.Problem{Key: e.Key(), Err: err})
			continue
		}
		if ch, ok := src.(sources.Checker); ok {
			for _, p := range ch.Check() {
				p.Key = e.Key() + "." + p.Key
				out = append(out, p)
			}
		}
	}
	for i := range out {
		if out[i].Origin == "" {
			out[i].Origin = c.File
		}
	}
	for _, w := range c.Warnings {
		out = append(out, sources.Problem{Err: errors.New(w), Warning: true})
	}
	return out
}
