package deploycheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

const nomadJob = "xdsbridge.nomad.hcl"

func loadJob(t *testing.T) (*api.Job, *api.TaskGroup, *api.Task) {
	t.Helper()
	job, err := ParseJob(nomadJob, readDeploy(t, "nomad", nomadJob))
	if err != nil {
		t.Fatal(err)
	}
	if len(job.TaskGroups) != 1 || len(job.TaskGroups[0].Tasks) != 1 {
		t.Fatalf("want one group of one task, have %d groups", len(job.TaskGroups))
	}
	return job, job.TaskGroups[0], job.TaskGroups[0].Tasks[0]
}

// TestNomadStrictDecoding checks that the job decoder rejects what Nomad's
// parser rejects: a change that misspells, repeats or mistypes a key must
// fail, naming it.
func TestNomadStrictDecoding(t *testing.T) {
	orig := string(readDeploy(t, "nomad", nomadJob))
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"misspelt argument", "max_parallel ", "max_paralel ", `unknown argument "max_paralel" in UpdateStrategy`},
		{"misspelt block", "check_restart {", "check_restrat {", `unknown block "check_restrat" in ServiceCheck`},
		{"second single block", "  update {", "  update {}\n  update {", `a second "update" block`},
		{"wrong type", "count = 3", `count = "three"`, "count: want a whole number"},
		{"bad duration", `min_healthy_time  = "30s"`, `min_healthy_time  = "30 seconds"`, "min_healthy_time"},
		{"missing label", `port "xds" {`, `port {`, `block "port" takes 1 label(s), has 0`},
		{"HCL variable", `path     = "/readyz"`, `path     = "${attr.path}"`, "Variables not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(orig, tc.old) {
				t.Fatalf("the job has no %q to change", tc.old)
			}
			_, err := ParseJob(nomadJob, []byte(strings.Replace(orig, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decoding the changed job: %v, want an error with %s", err, tc.want)
			}
		})
	}
}

// TestNomadJob checks what docs/deployment.md promises of the job: three
// allocations on distinct nodes, upgraded one at a time gated on the
// readiness check, and the container locked down.
func TestNomadJob(t *testing.T) {
	job, g, task := loadJob(t)
	if *job.ID != "xdsbridge" || *job.Type != "service" {
		t.Errorf("job %s of type %s, want the service job xdsbridge", *job.ID, *job.Type)
	}
	if g.Count == nil || *g.Count != 3 {
		t.Errorf("count %v, want 3", g.Count)
	}
	if !slices.ContainsFunc(g.Constraints, func(c *api.Constraint) bool { return c.Operand == "distinct_hosts" && c.RTarget == "true" }) {
		t.Error("no distinct_hosts constraint")
	}
	u := job.Update
	if u == nil || *u.MaxParallel != 1 || *u.HealthCheck != "checks" || !*u.AutoRevert || *u.MinHealthyTime < 10*time.Second {
		t.Errorf("update %+v, want one at a time, gated on checks held for 10s or more, reverted on failure", u)
	}
	if len(g.Services) != 1 {
		t.Fatalf("want one service, have %d", len(g.Services))
	}
	svc := g.Services[0]
	if svc.Provider != "consul" || svc.PortLabel != "xds" {
		t.Errorf("service %s (provider %s) on port %s, want a Consul service on the xds port", svc.Name, svc.Provider, svc.PortLabel)
	}
	var ready, alive bool
	for _, c := range svc.Checks {
		ready = ready || (c.Type == "http" && c.Path == "/readyz" && c.PortLabel == "admin" && c.CheckRestart == nil)
		alive = alive || (c.Type == "http" && c.Path == "/healthz" && c.PortLabel == "admin" && c.CheckRestart != nil && c.CheckRestart.Limit > 0)
	}
	if !ready || !alive {
		t.Errorf("checks %+v: want /readyz on the admin port (no restart) and /healthz restarting the task", svc.Checks)
	}
	conf := task.Config
	if conf["readonly_rootfs"] != true || !slices.Contains(conf["cap_drop"].([]any), any("all")) || !slices.Contains(conf["security_opt"].([]any), any("no-new-privileges")) {
		t.Errorf("docker config %v, want a read-only root, every capability dropped and no new privileges", conf)
	}
	if task.Resources == nil || task.Resources.MemoryMB == nil || task.Resources.CPU == nil {
		t.Error("the task sets no cpu or memory")
	}
}

// TestNomadConfigValidates renders the task's templates as the Nomad
// client would, into a task directory, and runs `bridge validate` on the
// configuration with the environment the templates declare.
func TestNomadConfigValidates(t *testing.T) {
	_, g, task := loadJob(t)
	ports := map[string]int{}
	for _, n := range g.Networks {
		for _, p := range append(n.ReservedPorts, n.DynamicPorts...) {
			ports[p.Label] = p.Value
			if p.To > 0 {
				ports[p.Label] = p.To
			}
		}
	}
	memory := *task.Resources.MemoryMB
	te := TaskEnv{
		Env: map[string]string{
			"NOMAD_PORT_xds":                 fmt.Sprint(ports["xds"]),
			"NOMAD_PORT_admin":               fmt.Sprint(ports["admin"]),
			"NOMAD_MEMORY_LIMIT":             fmt.Sprint(memory),
			"attr.unique.network.ip-address": testHostIP,
		},
		Vars: map[string]map[string]string{"nomad/jobs/xdsbridge": {"admin_token": "placeholder"}},
	}
	dir := t.TempDir()
	env, err := RenderTemplates(task, dir, te)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("GOMEMLIMIT=%dMiB", memory*4/5); !slices.Contains(env, want) {
		t.Errorf("the task's environment %v has no %s (80 %% of the memory limit)", env, want)
	}
	if tok, err := os.ReadFile(filepath.Join(dir, "secrets", "admin-token")); err != nil || strings.TrimSpace(string(tok)) != "placeholder" {
		t.Errorf("the admin token file holds %q (%v), want the Nomad variable's admin_token", tok, err)
	}
	// The image's entrypoint is the bridge; the task's args replace its
	// command and name the rendered configuration (the task directory's
	// local/ is /local in the container).
	img, err := ReadImage(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := task.Config["entrypoint"]; ok || !slices.Equal(img.Entrypoint, []string{"/usr/local/bin/bridge"}) {
		t.Errorf("the task overrides the entrypoint (%v), or the image's %q is not the bridge alone", task.Config["entrypoint"], img.Entrypoint)
	}
	var args []string
	if a, ok := task.Config["args"].([]any); ok {
		for _, v := range a {
			args = append(args, fmt.Sprint(v))
		}
	}
	path, err := ConfigFlag(args)
	if err != nil || len(args) == 0 || args[0] != "run" {
		t.Fatalf("the task's args %q, want run --config FILE (%v)", args, err)
	}
	sum, err := Validate(bridgeBin, filepath.Join(dir, path), env)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bridge validate:\n%s", sum.Output)
	if listenPort(t, sum.XDSListen) != ports["xds"] || listenPort(t, sum.AdminListen) != ports["admin"] {
		t.Errorf("the bridge listens on %s (xDS) and %s (admin), the job's ports are %v", sum.XDSListen, sum.AdminListen, ports)
	}
	if !slices.Equal(sum.Sources, []string{"consul (consul)"}) || len(sum.Warnings) > 0 {
		t.Errorf("sources %v and warnings %q, want the consul source and no warning", sum.Sources, sum.Warnings)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "local", "bridge.yaml"))
	if err != nil || !strings.Contains(string(cfg), "address: "+testHostIP+":8500") {
		t.Errorf("the rendered configuration does not read the node's Consul agent:\n%s", cfg)
	}
}
