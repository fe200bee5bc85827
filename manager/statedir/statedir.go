// Package statedir persists the services every source last reported to a
// file, so that a restarted bridge can serve them while a registry is
// unreachable (warm start; see manager.StateDir).
//
// The file (state.json in the configured directory) is JSON: the name of
// its format, a SHA-256 checksum of the payload, and the payload: per
// source its name, a fingerprint of its configuration and its services.
// The package owns the format: its records (format.go) carry their own
// json tags, and the model is converted to and from them in one place, so
// renaming a field of the model cannot change the file, and storing a new
// one takes a new Format. The file is replaced atomically: written to a
// temporary file in the same directory, fsynced, renamed over the old
// one, and the directory fsynced.
//
// Load trusts nothing it reads. A file that does not parse (corrupt,
// truncated), names a format this version does not read, has a wrong
// checksum or fields its format does not have is ignored whole, and Load
// says why in its error; a source whose fingerprint differs from its
// configuration today (another address, another datacenter), or whose
// services are not valid, is ignored alone, with one log line at WARN.
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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Format names the file format this version writes. Load also reads the
// formats readers lists.
const Format = "xdsbridge-state/2"

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

// file is the envelope of every format: the format's name, and the
// payload (the sources' records) with its checksum.
type file struct {
	Format   string          `json:"format"`
	Checksum string          `json:"checksum"`
	Sources  json.RawMessage `json:"sources"`
}

// readers decode the payload of each format this version reads into the
// current records.
var readers = map[string]func(payload []byte) ([]sourceRecord, error){
	Format: func(payload []byte) ([]sourceRecord, error) {
		var recs []sourceRecord
		if err := decodeStrict(payload, &recs); err != nil {
			return nil, err
		}
		return recs, nil
	},
	format1: func(payload []byte) ([]sourceRecord, error) {
		var old []source1
		if err := decodeStrict(payload, &old); err != nil {
			return nil, err
		}
		return upgrade1(old), nil
	},
}

// decodeStrict decodes a payload, rejecting fields the records do not
// have (encoding/json matches their names regardless of case): a file
// whose records differ from the format it names was not written by a
// writer of that format, and is not read in part.
func decodeStrict(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Load implements manager.StateDir.
func (s *Dir) Load() (map[string][]sources.Service, error) {
	recs, format, err := s.read()
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		// No file, or a path on which none can be (a file where a
		// directory should be, which the writes report): no state.
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	if format != Format {
		s.log.Info("reading the persisted state in an earlier format; the next save rewrites it",
			"file", s.path, "format", format, "writes", Format)
	}
	out := map[string][]sources.Service{}
	for _, r := range recs {
		want, ok := s.fingerprints[r.Name]
		switch {
		case !ok:
			continue // a source no longer configured
		case r.Fingerprint != want:
			s.log.Warn("ignoring the persisted state of a source: its configuration changed since",
				"file", s.path, "source", r.Name)
			continue
		}
		svcs, err := services(r.Services)
		if err == nil {
			err = validate(svcs)
		}
		if err != nil {
			s.log.Warn("ignoring the persisted state of a source", "file", s.path, "source", r.Name, "err", err)
			continue
		}
		out[r.Name] = svcs
		s.log.Info("loaded persisted state", "source", r.Name, "services", len(svcs))
	}
	return out, nil
}

// read returns the records of the file and the format it was written in.
func (s *Dir) read() ([]sourceRecord, string, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("reading: %w", err)
	}
	if len(data) > MaxSize {
		return nil, "", fmt.Errorf("larger than %d bytes", MaxSize)
	}
	var fl file
	if err := json.Unmarshal(data, &fl); err != nil {
		return nil, "", fmt.Errorf("corrupt or truncated: %w", err)
	}
	decode, ok := readers[fl.Format]
	if !ok {
		return nil, "", fmt.Errorf("format %q, which this version does not read (it reads %s): written by another version",
			fl.Format, strings.Join(slices.Sorted(maps.Keys(readers)), ", "))
	}
	if checksum(fl.Sources) != fl.Checksum {
		return nil, "", errors.New("corrupt: checksum mismatch")
	}
	recs, err := decode(fl.Sources)
	if err != nil {
		return nil, "", fmt.Errorf("corrupt: %w", err)
	}
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		if seen[r.Name] {
			return nil, "", fmt.Errorf("corrupt: source %q appears twice", r.Name)
		}
		seen[r.Name] = true
	}
	return recs, fl.Format, nil
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
	payload, err := json.Marshal(records(state, s.fingerprints))
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
