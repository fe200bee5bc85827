package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/internal/bridgetest"
	"github.com/xdsbridge/xdsbridge/internal/consultest"
	"github.com/xdsbridge/xdsbridge/internal/freeport"
)

func TestZZMeasureReload(t *testing.T) {
	agent := consultest.Start(t)
	var names []string
	cl := agent.Client()
	for i := range 500 {
		n := fmt.Sprintf("svc-%03d", i)
		names = append(names, n)
		if err := cl.Agent().ServiceRegister(&api.AgentServiceRegistration{ID: n + "-1", Name: n, Address: fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), Port: 8080}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	xdsAddr, adminAddr := freeport.Addr(t), freeport.Addr(t)
	cfg := filepath.Join(dir, "bridge.yaml")
	configure := func(ms string) {
		writeFile(t, cfg, fmt.Sprintf("xds: {listen: %s}\nadmin: {listen: %s}\nsources:\n  - {name: consul, type: consul, address: %s, max_stale: %s, services: {exclude: [consul]}}\n", xdsAddr, adminAddr, agent.HTTPAddr, ms))
	}
	configure("5s")
	p := start(t, cfg)
	bridgetest.WaitReady(t, adminAddr, patience)
	ws := watchBoth(t, xdsAddr, names)
	for _, w := range ws {
		w.serves(t, "all", nil)
	}
	time.Sleep(2 * time.Second)
	t0 := time.Now()
	configure("10s")
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	line := p.waitLog(patience, "source synced", "was=replacing")
	bridgetest.Eventually(t, patience, "synced", func() bool { return bridgetest.SourceStatus(t, adminAddr, "consul").Startup == "synced" })
	t.Logf("500 services, max_stale changed: new instance synced %v after SIGHUP; line %s", time.Since(t0), strings.TrimSpace(line))
	for _, w := range ws {
		t.Logf("%s: removals %d", w.node, len(w.lost()))
	}
	out := p.stderr.String()
	i := strings.Index(out, "reloading the configuration")
	j := strings.Index(out, "was=replacing")
	t.Logf("log between:\n%s", out[i:j+20])
	// 1000 SIGHUPs alternating the file, as fast as possible.
	before := strings.Count(p.stderr.String(), "configuration reloaded")
	t1 := time.Now()
	for i := range 1000 {
		configure([]string{"5s", "10s"}[i%2])
		_ = p.cmd.Process.Signal(syscall.SIGHUP)
	}
	sent := time.Since(t1)
	time.Sleep(3 * time.Second)
	bridgetest.Eventually(t, patience, "synced", func() bool { return bridgetest.SourceStatus(t, adminAddr, "consul").Startup == "synced" })
	after := strings.Count(p.stderr.String(), "configuration reloaded")
	re := regexp.MustCompile(`starting its new instance beside`)
	t.Logf("1000 SIGHUPs in %v: %d reloads applied, %d replacements started, %d instances reverted", sent, after-before,
		len(re.FindAllString(p.stderr.String(), -1)), strings.Count(p.stderr.String(), "changed back to the configuration in force"))
	for _, w := range ws {
		w.serves(t, "all after the storm", nil)
		t.Logf("%s: removals %d", w.node, len(w.lost()))
	}
}
