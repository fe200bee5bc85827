package statuspage

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/bridgetest"
)

// TestStatusPageSmall measures the status page of a small bridge in
// headless Chromium: every figure is filled in, for each path.
func TestStatusPageSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bridge binary and starts Chromium")
	}
	rs, err := Run(context.Background(), Config{
		BridgeBin: bridgetest.Binary(t), Chromium: bridgetest.Chromium(t), Services: 1200, Clients: 4, Paths: []string{"/", "/?q=svc-0001"},
		Runs: 2, Timeout: time.Minute, OutDir: t.TempDir(), Label: "test", Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want one per path", len(rs))
	}
	for _, r := range rs {
		if r.Bytes < 1000 || len(r.Fetch) != 2 || len(r.Loads) != 2 {
			t.Errorf("%s: %d bytes, %d fetches, %d loads", r.Path, r.Bytes, len(r.Fetch), len(r.Loads))
		}
		for _, l := range r.Loads {
			// The page's ages and versions move between loads; its size barely.
			if l.Bytes < r.Bytes*9/10 || l.Bytes > r.Bytes*11/10 || l.Load <= 0 || l.LastByte < l.FirstByte || l.Nodes < 100 || l.Layout <= 0 {
				t.Errorf("%s: a load's figures are missing: %+v", r.Path, l)
			}
		}
	}
	var csv strings.Builder
	if err := CSV(&csv, rs); err != nil || strings.Count(csv.String(), "\n") != 1+4 {
		t.Errorf("CSV (%v):\n%s", err, csv.String())
	}
	if md := Markdown(rs); strings.Count(md, "| test | ") != 2 {
		t.Errorf("markdown:\n%s", md)
	}
}
