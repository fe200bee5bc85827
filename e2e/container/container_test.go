// Package container_test builds the project's Dockerfile with podman and
// runs the image's own files, as far as a machine without a container
// registry or a working container runtime allows:
//
//   - the final stage is built from the Dockerfile itself, unchanged: its
//     base image is a stand-in of the same name (the distroless base
//     cannot be pulled here), and the build stage's output comes from
//     running the build stage's own go build command on the build context
//     as podman sends it (.dockerignore applied);
//   - the image's configuration (user, entrypoint, healthcheck, labels)
//     is read back from podman;
//   - the image's entrypoint is run from the image's root filesystem, as
//     the image's user, with the image's environment, in a network
//     namespace of its own, as `docker run IMAGE ARGS` would run it: with
//     `version`; with the default command and no configuration (exit 2,
//     naming the path: the image holds no demo data to serve instead);
//     with `validate FILE` on a configuration put where a volume would put
//     it; and with the default command, when it must answer /readyz and
//     the image's HEALTHCHECK command, run the same way, must fail before
//     and pass after.
//
// It needs root (chroot, network namespaces) and podman; without podman it
// is skipped, or fails when XDSBRIDGE_INTEGRATION is "required"
// (scripts/tools.sh installs podman as root). What it cannot show: that
// the real distroless base and a real container runtime behave the same.
package container_test

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/dockerfile"
	"github.com/xdsbridge/xdsbridge/test/syncbuf"
)

// repo is the repository root, the Dockerfile's build context.
const repo = "../.."

// getEnv makes this test binary, run in the image's network namespace by
// TestImage, an HTTP client of the bridge there: it GETs the URL and
// prints the status code and body.
const getEnv = "XDSBRIDGE_CONTAINER_TEST_GET"

func TestMain(m *testing.M) {
	if url := os.Getenv(getEnv); url != "" {
		resp, err := http.Get(url)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s", resp.StatusCode, body)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestImage(t *testing.T) {
	tools := need(t)
	df, err := dockerfile.Parse(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	final := df.Final()
	stage, src := copiedBinary(t, final)
	p := newPodman(t, tools["podman"])

	// The build stage, run on the host.
	version, revision := "e2e-"+fmt.Sprint(os.Getpid()), "0123456789abcdef"
	out := t.TempDir()
	bin := runBuildStage(t, df.Stage(stage), p.buildContext(repo), src, out, map[string]string{"VERSION": version, "REVISION": revision})
	checkStatic(t, bin)

	// The final stage, from the Dockerfile as it is.
	p.standInBase(final.From)
	const image = "localhost/xdsbridge:e2e"
	p.run("build", "--quiet", "--pull=never", "--format", "docker", "--build-context", stage+"="+out,
		"--build-arg", "VERSION="+version, "--build-arg", "REVISION="+revision,
		"--tag", image, "--file", filepath.Join(repo, "Dockerfile"), repo)
	cfg := p.inspect(image)
	checkConfig(t, final, cfg, version, revision)

	root := p.mount(image)
	sb := newSandbox(t, tools, root, cfg)
	health := cfg.Healthcheck.Test[1:]
	if out, err := sb.command(health...).CombinedOutput(); err == nil {
		t.Fatalf("the HEALTHCHECK %q passes with no bridge running: %s", health, out)
	}
	// docker run IMAGE ARGS: the entrypoint with ARGS for the command.
	docker := func(args ...string) *exec.Cmd {
		return sb.command(append(slices.Clone(cfg.Config.Entrypoint), args...)...)
	}
	if out, err := docker("version").CombinedOutput(); err != nil || !strings.Contains(string(out), version) {
		t.Errorf("docker run IMAGE version: %v, %q; want %s", err, out, version)
	}
	checkNoConfig(t, root, docker(cfg.Config.Cmd...))
	path := mountConfig(t, root, cfg.Config.Cmd)
	if out, err := docker("validate", path).CombinedOutput(); err != nil || !strings.Contains(string(out), "config OK") {
		t.Errorf("docker run IMAGE validate %s: %v, %q; want config OK", path, err, out)
	}
	bad := filepath.Join(filepath.Dir(path), "bad.yaml")
	if err := os.WriteFile(filepath.Join(root, bad), []byte("xds: {listne: 0.0.0.0:18000}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := exitCode(t, docker("validate", bad)); code != 2 || !strings.Contains(out, "xds.listne") {
		t.Errorf("docker run IMAGE validate %s: exit %d, %q; want 2 naming xds.listne", bad, code, out)
	}

	var stderr syncbuf.Buffer
	run := docker(cfg.Config.Cmd...)
	run.Stdout, run.Stderr = &stderr, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = run.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("the image's bridge:\n%s", stderr.String())
		}
	})

	waitHealthy(t, sb, health, exited)
	// By now nsenter and chroot have exec'd into the image's program.
	checkProcess(t, run.Process.Pid, root, sb.uid)
	readyz := "http://" + loopback(t, cfg, "BRIDGE_ADMIN_LISTEN") + "/readyz"
	get := sb.hostCommand(os.Args[0])
	get.Env = append(os.Environ(), getEnv+"="+readyz)
	if out, err := get.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "200 ") {
		t.Errorf("GET %s in the image's network namespace: %v, %q; want 200", readyz, err, out)
	}

	// docker stop sends SIGTERM.
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("the image's bridge exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the image's bridge did not stop within 30s of SIGTERM")
	}
}

// checkNoConfig checks that the image holds no configuration to serve
// (no demo data), and that its default command without one, as a `docker
// run` without the volume runs it, exits 2 naming the file it needs.
func checkNoConfig(t *testing.T, root string, run *exec.Cmd) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "etc", "xdsbridge")); !os.IsNotExist(err) {
		t.Errorf("the image has /etc/xdsbridge (%v): it must hold no configuration of its own", err)
	}
	code, out := exitCode(t, run)
	if code != 2 || !strings.Contains(out, "/etc/xdsbridge/bridge.yaml") {
		t.Errorf("the default command without a configuration: exit %d, %q; want 2 naming /etc/xdsbridge/bridge.yaml", code, out)
	}
}

// mountConfig puts the quick start's configuration and services file where
// `docker run -v $PWD/examples/quickstart:/etc/xdsbridge:ro` puts them: the
// directory of the file the default command cmd names with --config. It
// returns that file's path in the image.
func mountConfig(t *testing.T, root string, cmd []string) string {
	t.Helper()
	i := slices.Index(cmd, "--config")
	if i < 0 || i+1 >= len(cmd) {
		t.Fatalf("the default command %q names no --config FILE", cmd)
	}
	path := cmd[i+1]
	dir := filepath.Join(root, filepath.Dir(path))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"bridge.yaml", "services.yaml"} {
		data, err := os.ReadFile(filepath.Join(repo, "examples", "quickstart", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// exitCode runs cmd to completion and returns its exit code and output.
func exitCode(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("running %q: %v", cmd.Args, err)
	return 0, ""
}

// need returns the paths of the programs the test runs, or skips it: it
// needs root, and podman (required under XDSBRIDGE_INTEGRATION=required).
func need(t *testing.T) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the image's files run under chroot in a network namespace of their own")
	}
	tools := map[string]string{}
	for _, name := range []string{"podman", "unshare", "nsenter", "chroot", "ip", "sleep", "sh"} {
		p, err := exec.LookPath(name)
		if err != nil {
			msg := fmt.Sprintf("no %s on PATH (apt-get install podman util-linux coreutils iproute2; scripts/tools.sh installs podman as root)", name)
			if os.Getenv("XDSBRIDGE_INTEGRATION") == "required" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		tools[name] = p
	}
	return tools
}

// copiedBinary returns the stage the final stage copies the bridge from
// and the path it copies, from its COPY --from=STAGE SRC /usr/local/bin/bridge.
func copiedBinary(t *testing.T, final *dockerfile.Stage) (stage, src string) {
	t.Helper()
	for _, in := range final.All("COPY") {
		f := strings.Fields(in.Args)
		if len(f) == 3 && strings.HasPrefix(f[0], "--from=") && f[2] == "/usr/local/bin/bridge" {
			return strings.TrimPrefix(f[0], "--from="), f[1]
		}
	}
	t.Fatal("the final stage copies no /usr/local/bin/bridge from a build stage")
	return "", ""
}

// runBuildStage runs the go build of the build stage on the host, as the
// stage does: in the build context (which the stage copies whole into its
// WORKDIR), with the stage's ARG defaults overridden by args, writing the
// binary under out instead of the stage's src; it returns the binary's
// path. The stage must have the shape this emulates.
func runBuildStage(t *testing.T, stage *dockerfile.Stage, buildContext, src, out string, args map[string]string) string {
	t.Helper()
	if stage == nil {
		t.Fatal("no build stage of that name")
	}
	if !slices.ContainsFunc(stage.All("COPY"), func(in dockerfile.Instruction) bool { return in.Args == ". ." }) {
		t.Fatal("the build stage has no COPY . . (this test runs its go build in the whole build context)")
	}
	var build []dockerfile.Instruction
	for _, in := range stage.All("RUN") {
		if strings.Contains(in.Args, "go build") {
			build = append(build, in)
		}
	}
	if len(build) != 1 || !strings.Contains(build[0].Args, " -o "+src+" ") {
		t.Fatalf("want one RUN with go build -o %s in the build stage, have %+v", src, build)
	}
	env := os.Environ()
	for _, in := range stage.All("ARG") {
		k, v, _ := strings.Cut(in.Args, "=")
		if a, ok := args[k]; ok {
			v = a
		}
		env = append(env, k+"="+v)
	}
	bin := filepath.Join(out, src)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", strings.Replace(build[0].Args, " -o "+src+" ", " -o "+bin+" ", 1))
	cmd.Dir, cmd.Env = buildContext, env
	started := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the build stage's %q: %v\n%s", build[0].Args, err, out)
	}
	t.Logf("the build stage's go build took %s", time.Since(started).Round(time.Second))
	return bin
}

// checkStatic checks that the binary needs no dynamic loader or shared
// library: the base image has none.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, _ := f.ImportedLibraries()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || len(libs) > 0 {
			t.Fatalf("%s is dynamically linked (%v): it cannot run on a base without libc", bin, libs)
		}
	}
}

// checkConfig checks the built image's configuration against the
// Dockerfile's final stage and what the image promises.
func checkConfig(t *testing.T, final *dockerfile.Stage, cfg imageConfig, version, revision string) {
	t.Helper()
	execForm := func(cmd string) []string {
		in := final.All(cmd)
		if len(in) != 1 {
			t.Fatalf("%d %s instructions in the final stage, want 1", len(in), cmd)
		}
		argv, err := in[0].Exec()
		if err != nil {
			t.Fatal(err)
		}
		return argv
	}
	if want := execForm("ENTRYPOINT"); !slices.Equal(cfg.Config.Entrypoint, want) || !slices.Equal(want, []string{"/usr/local/bin/bridge"}) {
		t.Errorf("entrypoint %q, want the program alone, /usr/local/bin/bridge (the Dockerfile's: %q)", cfg.Config.Entrypoint, want)
	}
	if want := execForm("CMD"); !slices.Equal(cfg.Config.Cmd, want) || len(want) == 0 || want[0] != "run" {
		t.Errorf("command %q, want run ... (the Dockerfile's: %q)", cfg.Config.Cmd, want)
	}
	if cfg.Healthcheck == nil {
		t.Fatal("the image has no healthcheck (built without --format docker?)")
	}
	want := append([]string{"CMD"}, execForm("HEALTHCHECK")...)
	if !slices.Equal(cfg.Healthcheck.Test, want) || len(want) < 3 || want[2] != "healthcheck" {
		t.Errorf("healthcheck %q, want %q running bridge healthcheck", cfg.Healthcheck.Test, want)
	}
	for _, key := range []string{"BRIDGE_XDS_LISTEN", "BRIDGE_ADMIN_LISTEN"} {
		_, port, _ := strings.Cut(loopback(t, cfg, key), ":")
		if _, ok := cfg.Config.ExposedPorts[port+"/tcp"]; !ok {
			t.Errorf("%s listens on port %s, which the image does not expose (%v)", key, port, cfg.Config.ExposedPorts)
		}
	}
	if user := final.All("USER"); len(user) != 1 || cfg.Config.User != user[0].Args {
		t.Errorf("user %q, want the final stage's USER", cfg.Config.User)
	}
	for key, want := range map[string]string{"title": "xdsbridge", "version": version, "revision": revision, "source": "", "description": ""} {
		got := cfg.Config.Labels["org.opencontainers.image."+key]
		if got == "" || (want != "" && got != want) {
			t.Errorf("label org.opencontainers.image.%s = %q, want %q (or any, when empty)", key, got, want)
		}
	}
}

// checkProcess checks that the process pid runs as uid with root as its
// root directory: the image's files, as the image's user.
func checkProcess(t *testing.T, pid int, root string, uid int) {
	t.Helper()
	if got, err := os.Readlink(fmt.Sprintf("/proc/%d/root", pid)); err != nil || filepath.Clean(got) != filepath.Clean(root) {
		t.Errorf("the bridge's root directory is %q (%v), want the image's %s", got, err, root)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(status)) {
		if f := strings.Fields(l); len(f) == 5 && f[0] == "Uid:" && !slices.Equal(f[1:], slices.Repeat([]string{fmt.Sprint(uid)}, 4)) {
			t.Errorf("the bridge runs as %q, want uid %d throughout", l, uid)
		}
	}
}

// waitHealthy runs the HEALTHCHECK command as the runtime would, every
// 200 ms, until it passes; a bridge that exits first fails the test.
func waitHealthy(t *testing.T, sb *sandbox, health []string, exited <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := sb.command(health...).CombinedOutput()
		if err == nil {
			t.Logf("HEALTHCHECK %q: %s", health, strings.TrimSpace(string(out)))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the HEALTHCHECK %q still fails after 60s: %v %s", health, err, out)
		}
		select {
		case err := <-exited:
			t.Fatalf("the image's bridge exited: %v", err)
		case <-tick.C:
		}
	}
}

// loopback returns the loopback address of the listener the image's
// environment variable key sets (0.0.0.0:port in a container).
func loopback(t *testing.T, cfg imageConfig, key string) string {
	t.Helper()
	for _, kv := range cfg.Config.Env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return strings.Replace(v, "0.0.0.0", "127.0.0.1", 1)
		}
	}
	t.Fatalf("the image sets no %s", key)
	return ""
}
