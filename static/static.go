// Package static reads the Envoy resources a configuration names in files
// rather than the registry: secrets from PEM files (a certificate chain
// and its private key, or a CA bundle) and files of raw Envoy resources
// (listeners, route configurations, clusters and secrets as an Envoy
// bootstrap writes them). It reads them all at start, and again whenever
// a file changes; an entry whose new content does not load keeps its last
// good content, and the failure is counted and logged (once, then at most
// once a minute, then on recovery). What a key holds is never logged.
package static

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/internal/filewatch"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
)

// SecretSpec is a secret to read: from CertificateFile and
// PrivateKeyFile (a tls_certificate) or from CAFile (a
// validation_context). Key names the configuration entry in errors and
// metrics ("secrets[0]"); Grant is passed through to the State.
type SecretSpec struct {
	Key                             string
	Name                            string
	CertificateFile, PrivateKeyFile string
	CAFile                          string
	Grant                           []string
}

// FileSpec is a file of raw resources to read (translate.ParseRaw). Key,
// Scopes and Grant are passed through like SecretSpec's.
type FileSpec struct {
	Key    string
	File   string
	Scopes []string
	Grant  []string
}

// Options configure a Set.
type Options struct {
	Secrets []SecretSpec
	Files   []FileSpec
	// Reserved are names of the configuration's own listeners, route
	// configurations and secrets (by kind: "listener", "route",
	// "secret"), which no file may define too.
	Reserved map[string][]string
	Logger   *slog.Logger
	// Registerer, if set, receives xdsbridge_static_reloads_total.
	Registerer prometheus.Registerer
	// Poll is the interval of the check for changes no file event reports
	// (see filewatch); default filewatch.DefaultPoll.
	Poll time.Duration
}

// Secret is a secret read, with its entry's key and grant.
type Secret struct {
	Key      string
	Resource *tlsv3.Secret
	Grant    []string
}

// File is a file of raw resources read, with its entry's key, scopes and
// grant.
type File struct {
	Key    string
	Raw    translate.Raw
	Scopes []string
	Grant  []string
}

// State is what the Set serves: every entry's last good content, in the
// configuration's order. It is immutable: a change makes a new State.
type State struct {
	Secrets []Secret
	Files   []File
}

// Set reads the secrets and files of a configuration and watches them.
type Set struct {
	opts    Options
	log     *slog.Logger
	reloads *prometheus.CounterVec

	mu    sync.Mutex
	state State
}

// New reads every secret and file of opts. The first that does not load
// is the error, a *settings.KeyError naming the entry's file key.
func New(opts Options) (*Set, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Set{opts: opts, log: opts.Logger}
	s.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xdsbridge_static_reloads_total",
		Help: "Reloads of secret and resource files after a change, by configuration entry and result: applied, or rejected (the last good content stays served).",
	}, []string{"entry", "result"})
	for _, sp := range opts.Secrets {
		s.reloads.WithLabelValues(sp.Key, "applied")
		s.reloads.WithLabelValues(sp.Key, "rejected")
		sec, err := LoadSecret(sp.Name, sp.CertificateFile, sp.PrivateKeyFile, sp.CAFile)
		if err != nil {
			return nil, settings.Prefix(sp.Key, err)
		}
		s.state.Secrets = append(s.state.Secrets, Secret{Key: sp.Key, Resource: sec, Grant: sp.Grant})
	}
	for i, fs := range opts.Files {
		s.reloads.WithLabelValues(fs.Key, "applied")
		s.reloads.WithLabelValues(fs.Key, "rejected")
		raw, err := LoadRaw(fs.File)
		if err == nil {
			err = s.clash(i, raw, s.state.Files)
		}
		if err != nil {
			return nil, settings.Prefix(fs.Key+".file", err)
		}
		s.state.Files = append(s.state.Files, File{Key: fs.Key, Raw: raw, Scopes: fs.Scopes, Grant: fs.Grant})
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(s.reloads)
	}
	return s, nil
}

// LoadSecret reads the PEM files of one secret and builds it. Errors
// name the file key (certificate_file, private_key_file, ca_file) and
// never quote a key's bytes.
func LoadSecret(name, certFile, keyFile, caFile string) (*tlsv3.Secret, error) {
	if caFile != "" {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return nil, settings.Errorf("ca_file", "%v", err)
		}
		sec, err := translate.ValidationSecret(name, ca)
		if err != nil {
			return nil, settings.Errorf("ca_file", "%s: %v", caFile, err)
		}
		return sec, nil
	}
	chain, err := os.ReadFile(certFile)
	if err != nil {
		return nil, settings.Errorf("certificate_file", "%v", err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, settings.Errorf("private_key_file", "%v", err)
	}
	sec, err := translate.CertificateSecret(name, chain, key)
	if err != nil {
		return nil, settings.Errorf("certificate_file", "%s and %s: %v", certFile, keyFile, err)
	}
	return sec, nil
}

// LoadRaw reads and parses one file of raw resources.
func LoadRaw(file string) (translate.Raw, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return translate.Raw{}, err
	}
	return translate.ParseRaw(file, data)
}

// clash reports a resource of raw (the content of file i) named like a
// reserved name, a secret of the configuration, or a resource of the same
// kind in another of files.
func (s *Set) clash(i int, raw translate.Raw, files []File) error {
	taken := map[string]map[string]string{"listener": {}, "route": {}, "cluster": {}, "secret": {}}
	for kind, names := range s.opts.Reserved {
		for _, n := range names {
			if taken[kind] != nil {
				taken[kind][n] = "the configuration's " + kind + "s"
			}
		}
	}
	for _, sp := range s.opts.Secrets {
		taken["secret"][sp.Name] = sp.Key
	}
	for j, f := range files {
		if j == i {
			continue
		}
		for kind, names := range rawNames(f.Raw) {
			for _, n := range names {
				taken[kind][n] = s.opts.Files[j].Key
			}
		}
	}
	for kind, names := range rawNames(raw) {
		for _, n := range names {
			if by, ok := taken[kind][n]; ok {
				return fmt.Errorf("%s %q is defined by %s too", kind, n, by)
			}
		}
	}
	return nil
}

// rawNames are the names of raw's resources by kind.
func rawNames(raw translate.Raw) map[string][]string {
	out := map[string][]string{}
	for _, l := range raw.Listeners {
		out["listener"] = append(out["listener"], l.GetName())
	}
	for _, r := range raw.Routes {
		out["route"] = append(out["route"], r.GetName())
	}
	for _, c := range raw.Clusters {
		out["cluster"] = append(out["cluster"], c.GetName())
	}
	for _, sec := range raw.Secrets {
		out["secret"] = append(out["secret"], sec.GetName())
	}
	return out
}

// State returns what the Set serves now.
func (s *Set) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Paths are every file the Set reads.
func (s *Set) Paths() []string {
	var out []string
	for _, sp := range s.opts.Secrets {
		out = append(out, sp.CertificateFile, sp.PrivateKeyFile, sp.CAFile)
	}
	for _, fs := range s.opts.Files {
		out = append(out, fs.File)
	}
	out = slices.DeleteFunc(out, func(p string) bool { return p == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// Run watches the files until ctx ends. After each change it reloads every
// entry, keeps the last good content of those that do not load, and calls
// changed with the new State when some entry's content changed.
func (s *Set) Run(ctx context.Context, changed func(State)) {
	outages := map[string]*sources.Outage{}
	outage := func(key string) *sources.Outage {
		o := outages[key]
		if o == nil {
			o = &sources.Outage{Log: s.log.With("entry", key), Status: sources.NewStatus(key),
				Failing:   "cannot reload a changed file; its last good content stays served",
				Recovered: "reloaded a changed file"}
			outages[key] = o
		}
		return o
	}
	filewatch.Run(ctx, filewatch.Options{Paths: s.Paths(), Poll: s.opts.Poll}, func() {
		if st, ok := s.reload(outage); ok {
			changed(st)
		}
	})
}

// reload reads every entry again and reports the new State if it differs.
func (s *Set) reload(outage func(string) *sources.Outage) (State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := State{Secrets: slices.Clone(s.state.Secrets), Files: slices.Clone(s.state.Files)}
	diff := false
	for i, sp := range s.opts.Secrets {
		sec, err := LoadSecret(sp.Name, sp.CertificateFile, sp.PrivateKeyFile, sp.CAFile)
		if err != nil {
			s.reloads.WithLabelValues(sp.Key, "rejected").Inc()
			outage(sp.Key).Fail(settings.Prefix(sp.Key, err))
			continue
		}
		outage(sp.Key).Recover()
		if !sameSecret(next.Secrets[i].Resource, sec) {
			next.Secrets[i].Resource = sec
			s.reloads.WithLabelValues(sp.Key, "applied").Inc()
			diff = true
		}
	}
	for i, fs := range s.opts.Files {
		raw, err := LoadRaw(fs.File)
		if err == nil {
			err = s.clash(i, raw, next.Files)
		}
		if err != nil {
			s.reloads.WithLabelValues(fs.Key, "rejected").Inc()
			outage(fs.Key).Fail(settings.Prefix(fs.Key+".file", err))
			continue
		}
		outage(fs.Key).Recover()
		if !sameRaw(next.Files[i].Raw, raw) {
			next.Files[i].Raw = raw
			s.reloads.WithLabelValues(fs.Key, "applied").Inc()
			diff = true
		}
	}
	s.state = next
	return next, diff
}

// sameSecret and sameRaw report whether content read again is what is
// served.
func sameSecret(a, b *tlsv3.Secret) bool { return proto.Equal(a, b) }

func sameRaw(a, b translate.Raw) bool {
	return slices.EqualFunc(a.Listeners, b.Listeners, equal) && slices.EqualFunc(a.Routes, b.Routes, equal) &&
		slices.EqualFunc(a.Clusters, b.Clusters, equal) && slices.EqualFunc(a.Secrets, b.Secrets, equal)
}

func equal[M proto.Message](a, b M) bool { return proto.Equal(a, b) }
