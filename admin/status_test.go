package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

func TestStatusPage(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	h := Handler(Options{
		Pending: func() []string { return nil },
		Sources: func() []sources.StatusSnapshot { return nil },
		Status: func() Page {
			return Page{
				Now: now,
				Sources: []sources.StatusSnapshot{
					{Name: "consul", Synced: true, Stale: true, LastSuccess: now.Add(-time.Minute), FailingFrom: now.Add(-30 * time.Second),
						LastError: "connection refused", Failures: 4, Dropped: 2, PolicySnapshot: sources.PolicySnapshot{
							Startup:       sources.PhaseWarm,
							Guard:         &sources.GuardSnapshot{Until: now.Add(20 * time.Second), Reason: "removes 3 of 4 services", HeldServices: 3},
							ServiceErrors: map[string]string{"api": "weights sum past uint32"}}},
					{Name: "static", Synced: true, LastSuccess: now.Add(-5 * time.Second)},
				},
				Services: []ServiceRow{{Name: "web", Endpoints: 3, Healthy: 2, Priorities: 1}},
				Clients: []ClientRow{{ID: "<script>alert(1)</script>", Variant: "delta_ads", Connected: now.Add(-time.Hour),
					Types: []TypeRow{{Type: "EDS", Sent: "7", Acked: "5", Lag: 2, Pending: 1, Subscribed: 3,
						NACK: "bad weight", NACKedVersion: "6", NACKs: 1, NACKAt: now.Add(-2 * time.Second)}}}},
			}
		},
	})
	code, body := get(t, h, "/")
	if code != 200 {
		t.Fatalf("/ = %d", code)
	}
	for _, want := range []string{
		`<span class="ok" id="readiness">ready</span>`,
		`<span class="bad">stale</span>`, "connection refused", "30s ago", "startup: " + sources.PhaseWarm,
		"holding 3 services, 0 endpoints until 03:00:20", "removes 3 of 4 services", "weights sum past uint32",
		"<td>web</td>", "2 unacked, 1 pending", "bad weight", "v6 2s ago",
		"&lt;script&gt;alert(1)&lt;/script&gt;",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Errorf("page has a script or an external reference:\n%s", body)
	}
	if code, _ := get(t, h, "/nothing"); code != 404 {
		t.Errorf("/nothing = %d, want 404", code)
	}
}
