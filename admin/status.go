package admin

import (
	"embed"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
)

// Page is what the status page shows: the state an operator looks at first
// during an incident. The page itself shows a bounded part of it whatever
// its size (see view).
type Page struct {
	Now   time.Time
	About About
	// Pending names the sources that have not synced yet; empty once ready.
	Pending []string
	Sources []manager.SourceStatus
	// State is how persisting the state for warm starts goes.
	State    manager.StateDirStatus
	Services []ServiceRow // sorted by name
	Clients  []ClientRow  // sorted by node id
}

// About says what runs: which build, since when, on which configuration.
type About struct {
	Version    string
	Started    time.Time
	ConfigPath string
	// Loaded is when the configuration in force was read: at the start or
	// by the latest reload applied.
	Loaded time.Time
	// Rejected is the latest reload refused since then, nil if none: the
	// file on disk is not what runs.
	Rejected *Rejection
}

// Rejection is a configuration reload that was refused.
type Rejection struct {
	At    time.Time
	Error string
}

// ServiceRow is one served service.
type ServiceRow struct {
	Name string
	// Endpoints counts every endpoint, Healthy those a client routes to
	// (HEALTHY or UNKNOWN), Priorities the failover tiers.
	Endpoints, Healthy, Priorities int
}

// ClientRow is one connected xDS stream.
type ClientRow struct {
	ID, Cluster, Variant, Peer string
	Connected                  time.Time
	Types                      []TypeRow
}

// TypeRow is a stream's state for one resource type.
type TypeRow struct {
	Type string // short: CDS, EDS, LDS, RDS or the type URL
	// Sent is the version of the latest response, Acked the latest one the
	// client accepted; Lag counts responses sent and not (yet) ACKed, and
	// Pending the names changed and not yet sent: together, how far the
	// client is behind the current state.
	Sent, Acked   string
	Lag, Pending  int
	Subscribed    int
	Wildcard      bool
	NACK          string // the latest rejection's error, empty if none
	NACKAt        time.Time
	NACKs         int
	NACKedVersion string
}

// Client states, as the page counts and filters them.
const (
	// StateNACKing: for some type, the latest rejection is of a version
	// newer than the latest one accepted.
	StateNACKing = "nacking"
	// StateBehind: responses not yet ACKed or changes not yet sent.
	StateBehind = "behind"
	// StateCurrent: holds and has accepted everything sent.
	StateCurrent = "current"
)

// State classifies the stream; a NACK outranks a lag.
func (c ClientRow) State() string {
	state := StateCurrent
	for _, t := range c.Types {
		if t.NACKing() {
			return StateNACKing
		}
		if t.Lag > 0 || t.Pending > 0 {
			state = StateBehind
		}
	}
	return state
}

// Behind returns the types with responses unacknowledged or changes unsent.
func (c ClientRow) Behind() []TypeRow {
	return slices.DeleteFunc(slices.Clone(c.Types), func(t TypeRow) bool { return t.Lag == 0 && t.Pending == 0 })
}

// NACKed returns the types whose latest rejection stands (see NACKing).
func (c ClientRow) NACKed() []TypeRow {
	return slices.DeleteFunc(slices.Clone(c.Types), func(t TypeRow) bool { return !t.NACKing() })
}

// NACKing reports whether the latest rejection still stands: no version
// newer than the rejected one was accepted since. Versions are the
// engine's per-stream counters. A rejection of an unknown version (it
// answered an outdated response) stands only while nothing was accepted.
func (t TypeRow) NACKing() bool {
	if t.NACK == "" {
		return false
	}
	acked, err := strconv.Atoi(t.Acked)
	if err != nil {
		return true
	}
	nacked, err := strconv.Atoi(t.NACKedVersion)
	return err == nil && nacked > acked
}

//go:embed status.html
var pageFS embed.FS

var pageTemplate = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return now.Sub(t).Round(time.Second).String() + " ago"
	},
	"since": func(now, t time.Time) string { return now.Sub(t).Round(time.Second).String() },
	"n":     thousands,
	// more is what the "N more" line of a problem list needs.
	"more": func(n int, link string) struct {
		N    int
		Link string
	} {
		return struct {
			N    int
			Link string
		}{n, link}
	},
}).ParseFS(pageFS, "status.html"))

// statusPage renders the page; html/template escapes everything, which
// matters here: node ids, names and errors are client or registry input.
// The query selects what the long tables show (see parseFilter).
func statusPage(page func() Page) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.Header().Set("X-Frame-Options", "DENY")
		if err := pageTemplate.Execute(w, newView(page(), parseFilter(r.URL.Query()))); err != nil {
			// Headers are gone; all that is left is to say so in the body.
			_, _ = w.Write([]byte("\n<p>rendering failed: " + template.HTMLEscapeString(err.Error()) + "</p>"))
		}
	}
}

// thousands writes n with comma separators: counts on the page run to
// tens of thousands.
func thousands(n int) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
