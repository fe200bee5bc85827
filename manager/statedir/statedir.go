// Package statedir persists the services every source last reported to a
// file, so that a restarted bridge can serve them while a registry is
// unreachable (warm start; see manager.StateDir).
//
// The file (state.json in the configured directory) is JSON: a format tag,
// a SHA-256 checksum of the payload, and per source its name, a fingerprint
// of its configuration and its services. It is replaced atomically: written
// to a temporary file in the same directory, fsynced, renamed over the old
// one, and the directory fsynced.
//
// Load trusts nothing it reads: a file that does not parse, has another
// format tag or a wrong checksum is ignored whole; a source whose
// fingerprint differs from its configuration today (another address,
// another datacenter), or whose services are not valid, is ignored alone.
// Each rejection is one log line at WARN naming the file and the reason.
package statedir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Format tags the file layout; a file with another tag is foreign.
const Format = "xdsbridge-state/1"

// FileName is the name of the state file in the state directory.
const FileName = "state.json"

// MaxSize bounds the state file read at startup: a larger file is rejected
// rather than read into memory.
const MaxSize = 256 << 20

// Dir is the manager.StateDir of one directory. Bridge hands it to the
// manager; this package does not import manager, so that it stays a leaf.
type Dir struct {
	path         string
	fingerprints map[string]string
	log          *slog.Logger
}

// New returns the Dir of dir for sources whose configuration
// fingerprints (see Fingerprint) are given by name. It does no I/O.
func New(dir string, fingerprints map[string]string, log *slog.Logger) *Dir {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dir{path: filepath.Join(dir, FileName), fingerprints: fingerprints, log: log}
}

// Path is the state file's path.
func (s *Dir) Path() string { return s.path }

// Fingerprint identifies a source's configuration: its name, type and
// settings. encoding/json writes map keys sorted, so equal settings give
// equal fingerprints.
func Fingerprint(name, typ string, settings map[string]any) string {
	b, err := json.Marshal([]any{name, typ, settings})
	if err != nil {
		// Settings come from YAML: they always marshal. Fall back to
		// something that matches nothing rather than to a shared value.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

type file struct {
	Format   string          `json:"format"`
	Checksum string          `json:"checksum"`
	Sources  json.RawMessage `json:"sources"`
}

type entry struct {
	Name        string            `json:"name"`
	Fingerprint string            `json:"fingerprint"`
	Services    []sources.Service `json:"services"`
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Load implements manager.StateDir.
func (s *Dir) Load() map[string][]sources.Service {
	entries, err := s.read()
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("ignoring the persisted state: it cannot be trusted", "file", s.path, "err", err)
		}
		return nil
	}
	out := map[string][]sources.Service{}
	for _, e := range entries {
		want, ok := s.fingerprints[e.Name]
		switch {
		case !ok:
			continue // a source no longer configured
		case e.Fingerprint != want:
			s.log.Warn("ignoring the persisted state of a source: its configuration changed since",
				"file", s.path, "source", e.Name)
			continue
		}
		if err := validate(e.Services); err != nil {
			s.log.Warn("ignoring the persisted state of a source", "file", s.path, "source", e.Name, "err", err)
			continue
		}
		out[e.Name] = e.Services
		s.log.Info("loaded persisted state", "source", e.Name, "services", len(e.Services))
	}
	return out
}

func (s *Dir) read() ([]entry, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxSize)
	}
	var fl file
	if err := json.Unmarshal(data, &fl); err != nil {
		return nil, fmt.Errorf("corrupt: %w", err)
	}
	if fl.Format != Format {
		return nil, fmt.Errorf("format %q, not %q (written by another version)", fl.Format, Format)
	}
	if checksum(fl.Sources) != fl.Checksum {
		return nil, errors.New("corrupt: checksum mismatch")
	}
	var entries []entry
	if err := json.Unmarshal(fl.Sources, &entries); err != nil {
		return nil, fmt.Errorf("corrupt: %w", err)
	}
	return entries, nil
}

// validate checks what sources promise about the services they report.
func validate(svcs []sources.Service) error {
	seen := map[string]bool{}
	for _, svc := range svcs {
		if svc.Name == "" || seen[svc.Name] {
			return fmt.Errorf("service name %q empty or repeated", svc.Name)
		}
		seen[svc.Name] = true
		for _, e := range svc.Endpoints {
			if err := e.Validate(); err != nil {
				return fmt.Errorf("service %s: %w", svc.Name, err)
			}
		}
	}
	return nil
}

// Save implements manager.StateDir.
func (s *Dir) Save(state map[string][]sources.Service) error {
	entries := make([]entry, 0, len(state))
	for name, svcs := range state {
		entries = append(entries, entry{Name: name, Fingerprint: s.fingerprints[name], Services: svcs})
	}
	payload, err := json.Marshal(entries)
	if err != nil {
		return fmt.Errorf("encoding the state: %w", err)
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(file{Format: Format, Checksum: checksum(payload), Sources: payload}); err != nil {
		return fmt.Errorf("encoding the state: %w", err)
	}
	return writeAtomic(s.path, buf.Bytes())
}

// writeAtomic replaces path with data so that a crash at any point leaves
// either the old file or the new one.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".state-*.tmp")
	if err != nil {
		return fmt.Errorf("writing the state: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing the state: %w", err)
	}
	// The rename is durable once the directory is.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
