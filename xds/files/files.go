// Package files writes the xDS store as files that Envoy watches
// (path_config_source), for fleets that read their clusters and endpoints
// from disk (as those fed by consul-template do) rather than from a stream.
//
// Layout under Options.Dir:
//
//	cds.json           a DiscoveryResponse holding every cluster
//	eds/<name>.json    a DiscoveryResponse holding the one assignment <name>
//
// EDS needs a file per cluster: Envoy's EDS rejects an update that does not
// hold exactly its own cluster's assignment, and a filesystem subscription
// hands over the whole file. Each cluster in cds.json carries
// eds_config {path_config_source: {path: <EnvoyDir>/eds/<name>.json}}, so
// Envoy watches that file (for moves into place) and nothing else; an EDS
// file change reloads one cluster, not all. <name> is the assignment name
// with every byte outside [A-Za-z0-9_.-] (and a leading '.') written %XX.
// version_info is the content-hash version of the assignment for an EDS
// file and xds.VersionOf the clusters for cds.json: identical state gives
// identical files on every replica and after restarts, and a restart
// rewrites only the files whose content changed.
//
// Every file is replaced atomically: written to a temporary file in the same
// directory, made durable (fsync; one syncfs for a batch of EDS files on
// Linux), then renamed over the old one, so a reader never sees a partial
// file, not even after a crash. Writes follow make-before-break across files: first the
// EDS files that are new or changed, then cds.json, and only then the EDS
// files of assignments that are gone are deleted. The EDS file of a new
// cluster is thus in place before cds.json names it: Envoy reads it as
// soon as it creates the cluster, whereas a missing file would end the
// cluster's warming with no endpoints until the file appears. (On ADS the
// order is the reverse, CDS first, because there Envoy only asks for an
// assignment once it knows the cluster.)
//
// Nothing is written before the engine's first Apply (the readiness gate:
// files from the previous run stay as they are until the new state is
// complete). A failed write is logged and retried (after 1 s, doubling up
// to 30 s, with jitter) with the then current state; the order holds
// across retries because a failed step stops the sync before its later
// steps.
package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsbridge/xdsbridge/internal/pacing"
	"github.com/xdsbridge/xdsbridge/xds"
)

// File and directory names under Options.Dir.
const (
	CDSFile = "cds.json"
	EDSDir  = "eds"
	ext     = ".json"
	tmpPref = ".tmp-"
)

// Options configure a Writer.
type Options struct {
	Server *xds.Server
	// Dir is where the files are written; it is created if missing.
	Dir string
	// EnvoyDir is Dir as the Envoys see it (a volume may be mounted
	// elsewhere); the clusters' EDS paths are under it. Default Dir.
	EnvoyDir string
	// CDS writes cds.json; without it only the EDS files are written (for
	// Envoys whose clusters are static and name those files).
	CDS    bool
	Logger *slog.Logger
}

// Writer keeps the files of one directory in step with the store.
type Writer struct {
	opts    Options
	view    xds.View
	log     *slog.Logger
	eds     map[string]string // assignment name -> version on disk
	cds     string            // version of cds.json on disk ("" none)
	edsDir  string
	written func(op, name string) // test hook, after each completed step
}

// New creates o.Dir (if missing) and its eds subdirectory, checks both are
// writable, and reads the versions of the files already there. The error
// says what is wrong with the directory; the caller names the key.
func New(o Options) (*Writer, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.EnvoyDir == "" {
		o.EnvoyDir = o.Dir
	}
	w := &Writer{opts: o, log: o.Logger, eds: map[string]string{}, edsDir: filepath.Join(o.Dir, EDSDir)}
	if err := os.MkdirAll(w.edsDir, 0o755); err != nil { //nolint:gosec // Envoy reads these files, often as another user
		return nil, err
	}
	// Prove both directories writable now rather than at the first change.
	for _, d := range []string{o.Dir, w.edsDir} {
		probe, err := writeTemp(d, nil, false)
		if err != nil {
			return nil, err
		}
		if err := os.Remove(probe); err != nil {
			return nil, err
		}
	}
	envoyEDS := filepath.Join(o.EnvoyDir, EDSDir)
	w.view = xds.View{Rewrite: xds.NewRewrite("files", func(ref string) *corev3.ConfigSource {
		return &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{
				Path: filepath.Join(envoyEDS, FileName(ref)),
			}},
		}
	})}
	w.cds = versionOf(filepath.Join(o.Dir, CDSFile))
	if err := w.scan(); err != nil {
		return nil, err
	}
	return w, nil
}

// scan reads the versions of the EDS files on disk and removes temporary
// files left by an interrupted write.
func (w *Writer) scan() error {
	des, err := os.ReadDir(w.edsDir)
	if err != nil {
		return err
	}
	for _, de := range des {
		n := de.Name()
		switch {
		case strings.HasPrefix(n, tmpPref):
			_ = os.Remove(filepath.Join(w.edsDir, n))
		case strings.HasSuffix(n, ext):
			if name, ok := nameOf(n); ok {
				w.eds[name] = versionOf(filepath.Join(w.edsDir, n))
			}
		}
	}
	return nil
}

// versionOf reads the version_info of a file written earlier; "" if it
// cannot (then the file is rewritten).
func versionOf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var r struct {
		VersionInfo string `json:"version_info"`
	}
	if json.Unmarshal(b, &r) != nil {
		return ""
	}
	return r.VersionInfo
}

// Run keeps the files in step with the store until ctx is done. A failed
// sync is retried after a backoff (1 s doubling to 30 s, with jitter) with
// the then current state; changes of the store meanwhile wait for that
// retry rather than each trying the failing disk again.
func (w *Writer) Run(ctx context.Context) error {
	changes, stop := w.opts.Server.Changes()
	defer stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	bo := pacing.Backoff{Min: time.Second, Max: 30 * time.Second}
	fails := pacing.FailureLog{Log: w.log, Level: slog.LevelError,
		FailingMsg: "writing xDS files; keeping the files as they are and retrying", RecoveredMsg: "writing xDS files again"}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
			if fails.Failing() {
				continue
			}
		case <-retry.C:
		}
		if err := w.Sync(); err != nil {
			w.trace("fail", "")
			d := bo.Next()
			fails.Failed(err, "dir", w.opts.Dir, "in", d)
			retry.Reset(d)
			continue
		}
		bo.Reset()
		fails.Recovered("dir", w.opts.Dir)
	}
}

// Sync brings the files in step with the store once (nothing before the
// first Apply), in make-before-break order; see the package comment.
func (w *Writer) Sync() error {
	snap, ok := w.opts.Server.Snapshot(w.view, xds.ClusterType, xds.EndpointType)
	if !ok {
		return nil
	}
	live := make(map[string]bool, len(snap[xds.EndpointType]))
	var changed []xds.Item
	for _, it := range snap[xds.EndpointType] {
		live[it.Name] = true
		if w.eds[it.Name] != it.Version {
			changed = append(changed, it)
		}
	}
	if err := w.writeEDS(changed); err != nil {
		return err
	}
	if w.opts.CDS {
		clusters := snap[xds.ClusterType]
		if v := xds.VersionOf(clusters); v != w.cds {
			b, err := xds.ResponseJSON(xds.ClusterType, v, clusters)
			if err != nil {
				return err
			}
			tmp, err := writeTemp(w.opts.Dir, b, true)
			if err != nil {
				return fmt.Errorf("writing %s: %w", CDSFile, err)
			}
			if err := os.Rename(tmp, filepath.Join(w.opts.Dir, CDSFile)); err != nil {
				os.Remove(tmp)
				return fmt.Errorf("writing %s: %w", CDSFile, err)
			}
			w.cds = v
			w.trace("write", CDSFile)
		}
	}
	var errs []error
	for name := range w.eds {
		if live[name] {
			continue
		}
		err := os.Remove(filepath.Join(w.edsDir, FileName(name)))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing the EDS file of %q: %w", name, err))
			continue
		}
		delete(w.eds, name)
		w.trace("remove", name)
	}
	return errors.Join(errs...)
}

// writeEDS replaces the EDS files of items: every temporary file is
// written, all of them are made durable at once (one fsync for one file,
// else one flush of the filesystem: a cold start of thousands of files
// costs one disk commit, not one each), then they are renamed into place
// one by one in name order.
func (w *Writer) writeEDS(items []xds.Item) error {
	tmps := make([]string, 0, len(items))
	for _, it := range items {
		b, err := xds.ResponseJSON(xds.EndpointType, it.Version, []xds.Item{it})
		if err == nil {
			var tmp string
			tmp, err = writeTemp(w.edsDir, b, len(items) == 1)
			tmps = append(tmps, tmp)
		}
		if err != nil {
			removeAll(tmps)
			return fmt.Errorf("writing the EDS file of %q: %w", it.Name, err)
		}
	}
	if len(items) > 1 {
		if err := flush(w.edsDir, tmps); err != nil {
			removeAll(tmps)
			return fmt.Errorf("flushing the EDS files: %w", err)
		}
	}
	for i, it := range items {
		if err := os.Rename(tmps[i], filepath.Join(w.edsDir, FileName(it.Name))); err != nil {
			removeAll(tmps[i:])
			return fmt.Errorf("writing the EDS file of %q: %w", it.Name, err)
		}
		w.eds[it.Name] = it.Version
		w.trace("write", FileName(it.Name))
	}
	return nil
}

func removeAll(paths []string) {
	for _, p := range paths {
		if p != "" {
			os.Remove(p)
		}
	}
}

func (w *Writer) trace(op, name string) {
	if w.written != nil {
		w.written(op, name)
	}
}

// writeTemp writes data to a new temporary file in dir, fsynced if sync
// (else the caller flushes it), and returns its path: renamed over the real
// file, it replaces it atomically (readers see the old or the new content,
// never a part, also after a crash once it is durable).
func writeTemp(dir string, data []byte, sync bool) (path string, err error) {
	f, err := os.CreateTemp(dir, tmpPref+"*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return "", err
	}
	// Envoy may run as another user: the files are world-readable, like
	// the ones consul-template writes.
	if err = f.Chmod(0o644); err != nil {
		return "", err
	}
	if sync {
		if err = f.Sync(); err != nil {
			return "", err
		}
	}
	return f.Name(), f.Close()
}

// FileName is the EDS file name of an assignment: the name with every byte
// outside [A-Za-z0-9_.-], and a leading '.', written as %XX, plus ".json".
// Distinct names give distinct files, and no name gives a hidden file or a
// path outside the directory.
func FileName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || (c == '.' && i > 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String() + ext
}

// nameOf inverts FileName.
func nameOf(file string) (string, bool) {
	s := strings.TrimSuffix(file, ext)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 > len(s) {
			return "", false
		}
		c, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(c))
		i += 2
	}
	return b.String(), FileName(b.String()) == file
}
