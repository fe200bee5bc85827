package bridge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsbridge/xdsbridge/config"
	"github.com/xdsbridge/xdsbridge/test/testwait"
	"github.com/xdsbridge/xdsbridge/xds"
)

// viewsConfig is testConfig with REST (on listen) and a files output in dir.
func viewsConfig(listen, dir string) *config.Config {
	cfg := testConfig()
	cfg.XDS.ConfigCluster = "xds_cluster"
	cfg.XDS.REST = config.REST{Enabled: true, Listen: listen, RefreshDelay: time.Second, MaxRequestBytes: 1 << 20}
	cfg.Outputs = []config.Output{{Type: "files", Dir: dir, EnvoyDir: dir, Types: []string{"cds", "eds"}}}
	return cfg
}

// pollCDS POSTs an empty DiscoveryRequest for clusters to base.
func pollCDS(t *testing.T, base string) (int, *discoveryv3.DiscoveryResponse) {
	t.Helper()
	resp, err := http.Post(base+"/v3/discovery:clusters", "application/json", strings.NewReader(`{"node": {"id": "rest-1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r discoveryv3.DiscoveryResponse
	if err := protojson.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, &r
}

func TestViews(t *testing.T) {
	for _, c := range []struct{ name, listen string }{{"rest on admin", config.RESTOnAdmin}, {"rest on its own listener", "127.0.0.1:0"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in, err := New(viewsConfig(c.listen, dir), slog.New(slog.DiscardHandler), Build{Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			g := <-gates
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- in.Run(ctx) }()
			defer func() { cancel(); <-done }()

			base := "http://" + in.AdminAddr().String()
			if in.views.restLis != nil {
				base = "http://" + in.views.restLis.Addr().String()
				if code, _ := get(t, "http://"+in.AdminAddr().String()+"/v3/discovery:clusters"); code != http.StatusNotFound {
					t.Errorf("admin listener serves REST too: %d", code)
				}
			}
			if code, _ := pollCDS(t, base); code != http.StatusServiceUnavailable {
				t.Fatalf("REST before readiness: %d, want 503", code)
			}
			close(g.release)
			cds := filepath.Join(dir, "cds.json")
			testwait.Eventually(t, testwait.Patience, "cds.json", func() bool {
				b, err := os.ReadFile(cds)
				if err != nil {
					return false
				}
				var r discoveryv3.DiscoveryResponse
				if err := protojson.Unmarshal(b, &r); err != nil {
					t.Fatal(err)
				}
				var cl clusterv3.Cluster
				if len(r.Resources) != 1 || r.Resources[0].UnmarshalTo(&cl) != nil || cl.Name != "web" {
					t.Fatalf("cds.json: %v", &r)
				}
				return true
			})
			if code, _ := pollCDS(t, base); code != http.StatusOK {
				t.Fatalf("REST after readiness: %d", code)
			}
			_, body := get(t, "http://"+in.AdminAddr().String()+"/clients")
			var cs []xds.ClientStatus
			if err := json.Unmarshal([]byte(body), &cs); err != nil || len(cs) != 1 || cs[0].Variant != "rest" || cs[0].ID != "rest-1" {
				t.Fatalf("/clients = %s (%v)", body, err)
			}
		})
	}
}

func TestViewsBadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := viewsConfig(config.RESTOnAdmin, filepath.Join(file, "xds"))
	_, err := New(cfg, slog.New(slog.DiscardHandler), Build{Version: "test"})
	<-gates
	if err == nil || !strings.HasPrefix(err.Error(), "outputs[0].dir: ") {
		t.Fatalf("output dir under a file: error %v, want it to name outputs[0].dir", err)
	}
}
