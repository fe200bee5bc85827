// Package file is the `type: file` source: services read from a YAML or
// JSON file and re-read whenever it changes.
//
// Its keys and defaults are in docs/configuration.md; docs/file.md is its
// guide and shows both formats of the file: the xdsbridge format (a list
// of services, each with its endpoints), or a list of Prometheus target
// groups, the document of file_sd and http_sd. The file is JSON when its
// name ends in .json, YAML otherwise. Schema tells the two formats apart
// by the top-level value, a mapping or a list, so detection can never
// guess; declaring the format only turns a document of the other shape
// into an error that says which one the configuration expects.
//
// The source watches the file's directory (editors and consul-template
// replace a file by renaming a new one over it, which a watch on the file
// itself would lose) and also re-reads the file every poll_interval, in case
// the watch misses an event (a write through a hard link in another
// directory, a directory that did not exist yet). A change is published
// only when the content differs from what was last published: the first
// load as a Full update, later ones, where the file has the usual shape of
// the xdsbridge format (see itemCache), as a partial update with the
// services of the items that changed and the names of those gone, and
// otherwise as a Full update again.
//
// When the file is read (see gate):
//
//   - A file renamed into place is whole: it is read after the debounce.
//   - A file written in place, on Linux, is read once its writer has closed
//     it (inotify's IN_CLOSE_WRITE, after the debounce): however long the writer
//     pauses mid-file, nothing reads it before, the poll included. A writer
//     that keeps it open for longer than settle is named in the source's
//     status notes, and the last good content stays served.
//   - Where no close is reported, a file written in place is read once it
//     has been unmodified for settle, by the watch and the poll alike, so a
//     writer pausing for less than settle is never read half way and one
//     pausing for longer is. That is the case on other platforms, on network
//     file systems (NFS, SMB/CIFS, 9p, Ceph, FUSE, AFS, Coda, OCFS2, GFS2,
//     Lustre: writers on other hosts reach no local watch), while the
//     directory cannot be watched, for the next read after the kernel's
//     queue overflowed and lost changes, when the poll finds the file
//     changed in place with no change reported, and at start, since nothing
//     can tell yet whether a writer is at work (a file not modified in the
//     last settle is read at once).
//
// Whichever way, a read during which the file changed is thrown away. A
// writer that closes a short file has it read as it is: a file that lost
// services removes them, and the removal guard decides how fast.
//
// The xdsbridge format is all or nothing: an unknown field, a bad value or
// a duplicate name rejects the whole file with an error naming the file
// and the field (`services.yaml: services[1].endpoints[0].port: 70000 is
// outside 1..65535`). So is the shape of a target-group document, but its
// targets are registry data: one that is not IP:port or cannot be served is
// dropped, counted in the source's dropped_endpoints once per change of the
// file, and named in the status notes, and the rest is served. A rejected
// file's error is logged when it is new (the same error again at most
// once a minute, with a count) and recorded in the source's Status, and
// the last good content stays served until the file is fixed, which is
// logged once. A missing
// file is a failure of the same kind, so the source is not synced until the
// file first loads.
package file

import (
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Type is the value of the `type` key that selects this source.
const Type = "file"

func init() {
	sources.Register(sources.Type{Name: Type, New: New})
}

// Config is the source's configuration.
type Config struct {
	// Path of the services file; relative paths are relative to the
	// configuration file's directory.
	Path string `mapstructure:"path"`
	// PollInterval is how often the file is re-read regardless of watch
	// events.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// Settle is how long a file written in place must stay unmodified
	// before it is read where the writer's close is not reported.
	Settle time.Duration `mapstructure:"settle"`
	// MaxBytes is the largest file accepted.
	MaxBytes int64 `mapstructure:"max_bytes"`
	// Schema holds format, service_label and default_service.
	Schema `mapstructure:",squash"`
}

// Defaults of Config.
const (
	DefaultPollInterval = 5 * time.Second
	DefaultSettle       = time.Second
	DefaultMaxBytes     = 32 << 20
)

// debounce is how long the source waits after a watch event for more
// events before it reads the file: a write is often several events (create,
// write, chmod, rename), and a truncate-then-write must not be read half way.
const debounce = 100 * time.Millisecond

// Validate reports the first invalid key.
func (c Config) Validate() error {
	if strings.TrimSpace(c.Path) == "" {
		return settings.Errorf("path", "is required")
	}
	if c.PollInterval < 0 {
		return settings.Errorf("poll_interval", "must be positive, got %v", c.PollInterval)
	}
	if c.Settle < 0 {
		return settings.Errorf("settle", "must be positive, got %v", c.Settle)
	}
	if c.MaxBytes < 0 {
		return settings.Errorf("max_bytes", "must be positive, got %d", c.MaxBytes)
	}
	return c.Schema.Validate()
}

// Source reads services from a file. Create it with New.
type Source struct {
	name     string // the path as configured, used in errors
	path     string // the path resolved against the base directory
	json     bool
	poll     time.Duration
	debounce time.Duration
	settle   time.Duration
	maxBytes int64
	schema   Schema
	// closeWrite lets reads wait for a writer's close where the watch
	// reports closes; tests clear it to exercise the settle fallback.
	closeWrite bool
	log        *slog.Logger
	status     *sources.Status
}

var _ sources.Source = (*Source)(nil)

// New decodes and validates cfg. It does no I/O: the file is read by Run.
func New(cfg map[string]any, opts sources.Options) (sources.Source, error) {
	var c Config
	if err := settings.Decode(cfg, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	return newSource(c, opts), nil
}

func newSource(c Config, opts sources.Options) *Source {
	opts = opts.WithDefaults()
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	path := c.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(opts.BaseDir, path)
	}
	s := &Source{
		name:       c.Path,
		path:       filepath.Clean(path),
		json:       strings.EqualFold(filepath.Ext(path), ".json"),
		poll:       c.PollInterval,
		debounce:   debounce,
		settle:     c.Settle,
		maxBytes:   c.MaxBytes,
		schema:     c.Schema,
		closeWrite: true,
		log:        opts.Logger,
		status:     opts.Status,
	}
	return s
}
