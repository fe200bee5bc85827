package container_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// podman runs podman on a storage of its own in a temporary directory
// (the vfs driver: plain directories, no mounts), so that the test neither
// sees nor leaves images in the machine's storage and runs beside others.
type podman struct {
	t    *testing.T
	bin  string
	args []string // the storage flags, before every command
}

func newPodman(t *testing.T, bin string) *podman {
	t.Helper()
	dir := t.TempDir()
	return &podman{t: t, bin: bin, args: []string{
		"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs"}}
}

// run runs podman with args and returns its standard output; a failure
// fails the test with podman's messages.
func (p *podman) run(args ...string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, p.bin, append(append([]string{}, p.args...), args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		p.t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// mount returns the root filesystem of image as a directory, released
// when the test ends.
func (p *podman) mount(image string) string {
	p.t.Helper()
	dir := p.run("image", "mount", image)
	p.t.Cleanup(func() { p.run("image", "unmount", image) })
	return dir
}

// buildContext returns the directory tree that a build with the context
// dir receives, the .dockerignore in dir applied, by building an image that
// copies the whole context and mounting it.
func (p *podman) buildContext(dir string) string {
	p.t.Helper()
	file := filepath.Join(p.t.TempDir(), "Containerfile")
	if err := os.WriteFile(file, []byte("FROM scratch\nCOPY . /context/\n"), 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.run("build", "--quiet", "--file", file, "--tag", "localhost/xdsbridge-context:e2e", dir)
	tree := filepath.Join(p.mount("localhost/xdsbridge-context:e2e"), "context")
	// The plain names the ignore file lists must be missing from the tree,
	// or podman did not apply it and the tree is not what a build gets.
	ignore, err := os.ReadFile(filepath.Join(dir, ".dockerignore"))
	if err != nil {
		p.t.Fatal(err)
	}
	for name := range strings.Lines(string(ignore)) {
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, "*?[!#/") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(tree, name)); err == nil {
			p.t.Fatalf("the build context holds %s, which .dockerignore excludes", name)
		}
	}
	return tree
}

// The user database of the distroless base, whose nonroot user the image
// runs as: uid and gid 65532, home /home/nonroot.
const (
	distrolessPasswd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	distrolessGroup = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
)

// standInBase builds, under the name of the base image name, an image
// with what the image built on it relies on from the distroless base: the
// user database naming nonroot, /tmp and the nonroot user's home. No
// registry can be reached here to pull the real one.
func (p *podman) standInBase(name string) {
	p.t.Helper()
	dir := p.t.TempDir()
	for path, text := range map[string]string{"rootfs/etc/passwd": distrolessPasswd, "rootfs/etc/group": distrolessGroup} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(text), 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
	for _, d := range []string{"rootfs/tmp", "rootfs/home/nonroot"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			p.t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "rootfs", "tmp"), 0o777|os.ModeSticky); err != nil {
		p.t.Fatal(err)
	}
	containerfile := "FROM scratch\nCOPY rootfs/ /\nCOPY --chown=65532:65532 rootfs/home/nonroot /home/nonroot\n"
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte(containerfile), 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.run("build", "--quiet", "--format", "docker", "--tag", name, dir)
}

// imageConfig is what the tests read of `podman image inspect`.
type imageConfig struct {
	Config struct {
		User         string
		Env          []string
		Entrypoint   []string
		Cmd          []string
		WorkingDir   string
		Labels       map[string]string
		ExposedPorts map[string]struct{}
	}
	Healthcheck *struct {
		Test []string
	}
}

func (p *podman) inspect(image string) imageConfig {
	p.t.Helper()
	var out []imageConfig
	if err := json.Unmarshal([]byte(p.run("image", "inspect", "--format", "json", image)), &out); err != nil || len(out) != 1 {
		p.t.Fatalf("podman image inspect %s: %d images, %v", image, len(out), err)
	}
	return out[0]
}
