package admin

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/sources"
)

var pageNow = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

// pageHandler serves the status page of p alone.
func pageHandler(p Page) http.Handler {
	return Handler(Options{
		Pending: func() []string { return nil },
		Sources: func() []manager.SourceStatus { return nil },
		Status:  func() Page { return p },
	})
}

func TestStatusPage(t *testing.T) {
	now := pageNow
	h := pageHandler(Page{
		Now: now,
		About: About{Version: "v1.4.2", Started: now.Add(-3 * time.Hour), ConfigPath: "/etc/xdsbridge/bridge.yaml",
			Loaded: now.Add(-10 * time.Minute), Rejected: &Rejection{At: now.Add(-time.Minute), Error: "sources[0].type: unknown source type \"fiel\""}},
		Sources: []manager.SourceStatus{
			{StatusSnapshot: sources.StatusSnapshot{Name: "consul", Synced: true, Stale: true, LastSuccess: now.Add(-time.Minute), FailingFrom: now.Add(-30 * time.Second),
				LastError: "connection refused", Failures: 4, FailuresTotal: 9, Dropped: 2},
				Startup:       manager.PhaseWarm,
				Guard:         &manager.GuardSnapshot{Until: now.Add(20 * time.Second), Reason: "removes 3 of 4 services", HeldServices: 3},
				ServiceErrors: map[string]string{"api": "weights sum past uint32"}},
			{StatusSnapshot: sources.StatusSnapshot{Name: "static", Synced: true, LastSuccess: now.Add(-5 * time.Second), FailuresTotal: 7,
				Notes: map[string]string{"acl": "results hidden by ACLs"}}},
		},
		Services: []ServiceRow{{Name: "api", Endpoints: 2, Healthy: 2, Priorities: 1}, {Name: "web", Endpoints: 3, Healthy: 2, Priorities: 1}},
		Clients: []ClientRow{{ID: "<script>alert(1)</script>", Variant: "delta_ads", Connected: now.Add(-time.Hour),
			Types: []TypeRow{{Type: "EDS", Sent: "7", Acked: "5", Lag: 2, Pending: 1, Subscribed: 3,
				NACK: "bad weight", NACKedVersion: "6", NACKs: 1, NACKAt: now.Add(-2 * time.Second)}}}},
	})
	code, body := get(t, h, "/")
	if code != 200 {
		t.Fatalf("/ = %d", code)
	}
	for _, want := range []string{
		`<span class="ok" id="readiness">ready</span>`, `<meta http-equiv="refresh" content="5">`,
		`id="version">v1.4.2<`, "up 3h0m0s", "<code>/etc/xdsbridge/bridge.yaml</code> loaded 10m0s ago",
		`reload rejected 1m0s ago`, `unknown source type &#34;fiel&#34;`,
		`<span class="bad">stale</span>`, "connection refused", "30s ago", "startup: " + manager.PhaseWarm,
		"holding 3 services, 0 endpoints until 03:00:20", "removes 3 of 4 services", "weights sum past uint32",
		"acl: results hidden by ACLs",
		`<a href="/debug/why?cluster=web">web</a>`, "2 unacked, 1 pending", "bad weight", "v6 2s ago",
		`<a href="/debug/config_dump?node=%3cscript%3ealert%281%29%3c%2fscript%3e">&lt;script&gt;alert(1)&lt;/script&gt;</a>`,
		// Failures is the current failing period's; the page says where the total is.
		`<td class="n failures">4</td>`, `<td class="n failures">0</td>`, "xdsbridge_source_failures_total",
		`href="/debug/config_dump"`, "/debug/why?cluster=NAME",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, want := range []string{
		"Sources 2 1 synced, 1 stale, 1 holding removals",
		"Services 2 5 endpoints, 4 healthy; 1 failing",
		"Clients 1 0 current, 1 NACKing",
	} {
		if !strings.Contains(text(body), want) {
			t.Errorf("page lacks the text %q", want)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Errorf("page has a script or an external reference:\n%s", body)
	}
	if code, _ := get(t, h, "/nothing"); code != 404 {
		t.Errorf("/nothing = %d, want 404", code)
	}
}

// largePage has n services, of which every 100th has no healthy endpoint
// and every 250th none at all, and c clients, of which every 50th NACKs
// and every 20th (not NACKing) is behind.
func largePage(n, c int) Page {
	p := Page{Now: pageNow, Sources: []manager.SourceStatus{{StatusSnapshot: sources.StatusSnapshot{Name: "consul", Synced: true, LastSuccess: pageNow}}}}
	for i := range n {
		s := ServiceRow{Name: fmt.Sprintf("svc-%05d", i), Endpoints: 3, Healthy: 3, Priorities: 1}
		switch {
		case i%250 == 2:
			s.Endpoints, s.Healthy = 0, 0
		case i%100 == 1:
			s.Healthy = 0
		}
		p.Services = append(p.Services, s)
	}
	for i := range c {
		row := ClientRow{ID: fmt.Sprintf("envoy-%04d", i), Cluster: "fleet", Variant: "delta_ads", Connected: pageNow.Add(-time.Hour)}
		for _, typ := range []string{"CDS", "EDS"} {
			tr := TypeRow{Type: typ, Sent: "12", Acked: "12", Subscribed: 3}
			switch {
			case i%50 == 0 && typ == "EDS":
				tr.Acked, tr.NACK, tr.NACKedVersion, tr.NACKs, tr.NACKAt = "11", "endpoint weight out of range", "12", 1, pageNow.Add(-time.Second)
			case i%50 != 0 && i%20 == 0:
				tr.Acked, tr.Lag = "11", 1
			}
			row.Types = append(row.Types, tr)
		}
		p.Clients = append(p.Clients, row)
	}
	return p
}

// TestStatusPageLarge checks that the page at 10,000 services and 1,000
// clients is a summary and the problems first, then one page of each long
// table, and that its size stays bounded.
func TestStatusPageLarge(t *testing.T) {
	const maxBytes = 256 << 10
	h := pageHandler(largePage(10_000, 1_000))
	code, body := get(t, h, "/")
	if code != 200 {
		t.Fatalf("/ = %d", code)
	}
	t.Logf("page: %d bytes", len(body))
	if len(body) > maxBytes {
		t.Errorf("page is %d bytes, want at most %d", len(body), maxBytes)
	}
	for _, want := range []string{
		"Services 10,000 29,880 endpoints, 29,580 healthy; 40 without endpoints; 100 without healthy endpoints",
		"Clients 1,000 940 current, 40 behind, 20 NACKing",
		"Clients NACKing (20)", "Clients behind (40)", "Services without healthy endpoints (100)", "Services without endpoints (40)",
		"(1–100 of 10,000)", "(1–50 of 1,000)",
	} {
		if !strings.Contains(text(body), want) {
			t.Errorf("page lacks the text %q", want)
		}
	}
	for _, want := range []string{
		`<a href="/?only=problems#clients">10 more</a>`,  // NACKing clients
		`<a href="/?only=problems#services">90 more</a>`, // services without healthy endpoints
		`href="/?page=2#services"`, `href="/?cpage=2#clients"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Problems first: the NACKing clients come before the tables.
	if p, tables := strings.Index(body, "envoy-0050"), strings.Index(body, `id="sources"`); p < 0 || p > tables {
		t.Errorf("the NACKing client envoy-0050 is at %d, the sources table at %d; want it listed before", p, tables)
	}
	if n := strings.Count(body, `href="/debug/why?cluster=`); n > 100+4*problemsShown {
		t.Errorf("%d service links on the page, want one page and the problems", n)
	}
	if strings.Contains(body, "svc-09999") || strings.Contains(body, "envoy-0999") {
		t.Error("the first page shows the last service or client")
	}
}

// TestStatusPageFilter checks the query that selects the long tables'
// rows: a text, problems only, a page, and no refresh.
func TestStatusPageFilter(t *testing.T) {
	h := pageHandler(largePage(10_000, 1_000))
	for _, c := range []struct {
		name, path string
		want, not  []string
	}{
		{"text", "/?q=SVC-04", []string{"(1–100 of 1,000 matching, 10,000 in all)", `>svc-04000</a>`, `>svc-04099</a>`,
			`value="SVC-04"`, `href="/?page=2&amp;q=SVC-04#services"`, `href="/#services">show all</a>`},
			[]string{">svc-03999</a>", ">svc-04100</a>"}},
		{"text matches a cluster", "/?q=fleet", []string{"(1–50 of 1,000)", "(0 matching, 10,000 in all)"}, nil},
		{"problems only", "/?only=problems", []string{"(1–100 of 140 matching, 10,000 in all)", "(1–50 of 60 matching, 1,000 in all)",
			`name="only" value="problems" checked`, `>svc-00001</a>`, `>svc-00002</a>`},
			[]string{">svc-00000</a>", ">envoy-0001</a>"}},
		{"a page", "/?page=3&cpage=20", []string{"(201–300 of 10,000)", ">svc-00200</a>", ">svc-00299</a>", "(951–1,000 of 1,000)",
			">envoy-0999</a>", `href="/?cpage=20&amp;page=2#services"`, "page 20 of 20"},
			[]string{">svc-00199</a>", ">svc-00300</a>"}},
		{"past the end", "/?page=9999", []string{"(9,901–10,000 of 10,000)", "page 100 of 100"}, nil},
		{"nonsense", "/?page=-3&cpage=x", []string{"(1–100 of 10,000)", "(1–50 of 1,000)"}, nil},
		{"a filter text is cut", "/?q=svc-" + strings.Repeat("0", 300), []string{`value="svc-` + strings.Repeat("0", maxQuery-4) + `"`},
			[]string{strings.Repeat("0", maxQuery)}},
		{"no refresh", "/?refresh=off&q=svc", []string{`<input type="hidden" name="refresh" value="off">`,
			`href="/?q=svc">refresh every 5 s</a>`, `href="/?page=2&amp;q=svc&amp;refresh=off#services"`},
			[]string{`http-equiv="refresh"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := get(t, h, c.path)
			if code != 200 {
				t.Fatalf("%s = %d", c.path, code)
			}
			for _, want := range c.want {
				if !strings.Contains(body, want) {
					t.Errorf("%s lacks %q", c.path, want)
				}
			}
			for _, not := range c.not {
				if strings.Contains(body, not) {
					t.Errorf("%s has %q", c.path, not)
				}
			}
		})
	}
}

func TestClientState(t *testing.T) {
	for _, c := range []struct {
		name  string
		types []TypeRow
		want  string
	}{
		{"no request yet", nil, StateCurrent},
		{"everything ACKed", []TypeRow{{Sent: "4", Acked: "4"}}, StateCurrent},
		{"unacked", []TypeRow{{Sent: "4", Acked: "3", Lag: 1}}, StateBehind},
		{"changes not sent", []TypeRow{{Sent: "4", Acked: "4", Pending: 2}}, StateBehind},
		{"NACKed the latest", []TypeRow{{Sent: "4", Acked: "3", NACK: "bad", NACKedVersion: "4"}}, StateNACKing},
		{"NACK outranks lag", []TypeRow{{Sent: "4", Acked: "3", Lag: 1}, {Sent: "2", Acked: "1", NACK: "bad", NACKedVersion: "2"}}, StateNACKing},
		{"accepted a later version", []TypeRow{{Sent: "5", Acked: "5", NACK: "bad", NACKedVersion: "4"}}, StateCurrent},
		{"NACK before any ACK", []TypeRow{{Sent: "1", NACK: "bad", NACKedVersion: "1"}}, StateNACKing},
		{"NACK of an outdated response, ACKed since", []TypeRow{{Sent: "5", Acked: "5", NACK: "bad"}}, StateCurrent},
	} {
		if got := (ClientRow{Types: c.types}).State(); got != c.want {
			t.Errorf("%s: State = %q, want %q", c.name, got, c.want)
		}
	}
}

var (
	tag         = regexp.MustCompile(`<[^>]*>`)
	punctuation = regexp.MustCompile(` ([,;:)])`)
)

// text is roughly what a reader sees of an HTML page: no tags, entities
// decoded, white space collapsed.
func text(page string) string {
	s := strings.Join(strings.Fields(html.UnescapeString(tag.ReplaceAllString(page, " "))), " ")
	return punctuation.ReplaceAllString(s, "$1")
}
