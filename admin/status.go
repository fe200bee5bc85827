package admin

import (
	"embed"
	"html/template"
	"net/http"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Page is what the status page shows: the state an operator looks at first
// during an incident.
type Page struct {
	Now time.Time
	// Pending names the sources that have not synced yet; empty once ready.
	Pending  []string
	Sources  []sources.StatusSnapshot
	Services []ServiceRow
	Clients  []ClientRow
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

//go:embed status.html
var pageFS embed.FS

var pageTemplate = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return now.Sub(t).Round(time.Second).String() + " ago"
	},
}).ParseFS(pageFS, "status.html"))

// statusPage renders the page; html/template escapes everything, which
// matters here: node ids, names and errors are client or registry input.
func statusPage(page func() Page) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.Header().Set("X-Frame-Options", "DENY")
		if err := pageTemplate.Execute(w, page()); err != nil {
			// Headers are gone; all that is left is to say so in the body.
			_, _ = w.Write([]byte("\n<p>rendering failed: " + template.HTMLEscapeString(err.Error()) + "</p>"))
		}
	}
}
