package container_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/xdsbridge/xdsbridge/test/childproc"
)

// sandbox runs commands the way a container runtime would run the image,
// as far as this machine allows without one: in a network namespace of
// their own (a loopback interface only, so the image's fixed ports are
// free and nothing outside reaches them), with the image's root
// filesystem as their root, as the image's user, with the image's
// environment.
type sandbox struct {
	t        *testing.T
	tools    map[string]string // absolute paths of unshare, nsenter, chroot, ip, sleep, sh
	holder   *exec.Cmd         // keeps the network namespace alive
	root     string
	uid, gid int
	env      []string
}

// newSandbox creates the network namespace, held by a process of its own
// until the test ends, and brings its loopback interface up.
func newSandbox(t *testing.T, tools map[string]string, root string, cfg imageConfig) *sandbox {
	t.Helper()
	s := &sandbox{t: t, tools: tools, root: root}
	s.uid, s.gid = lookupUser(t, root, cfg.Config.User)
	home := "/"
	if h := userHome(t, root, s.uid); h != "" {
		home = h
	}
	// A container runtime adds HOME from the user database when the image
	// does not set it.
	s.env = append([]string{"HOME=" + home}, cfg.Config.Env...)
	// The holder brings the namespace's loopback up itself and says so
	// before it sleeps: until unshare has run, /proc/PID/ns/net of the
	// holder is still the host's namespace, so configuring it from
	// outside right after Start could race with the unshare.
	s.holder = exec.Command(tools["unshare"], "--net", "--", tools["sh"], "-c",
		`"$0" link set lo up && echo up && exec "$1" infinity`, tools["ip"], tools["sleep"])
	childproc.Tie(s.holder)
	var errOut strings.Builder
	s.holder.Stderr = &errOut
	stdout, err := s.holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.holder.Start(); err != nil {
		t.Fatalf("creating a network namespace: %v", err)
	}
	t.Cleanup(func() { _ = s.holder.Process.Kill(); _ = s.holder.Wait() })
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "up\n" {
		t.Fatalf("bringing up the new network namespace's loopback: %q %s", line, errOut.String())
	}
	return s
}

// netns is the namespace's path in /proc.
func (s *sandbox) netns() string { return fmt.Sprintf("/proc/%d/ns/net", s.holder.Process.Pid) }

// hostCommand runs a program of the host (not of the image) in the
// namespace, as root.
func (s *sandbox) hostCommand(argv ...string) *exec.Cmd {
	return exec.Command(s.tools["nsenter"], append([]string{"--net=" + s.netns(), "--"}, argv...)...)
}

// command runs argv, a path in the image, in the namespace, chrooted to
// the image's root filesystem, as the image's user and group, with the
// image's environment. nsenter and chroot exec without forking, so the
// process started is the image's program itself.
func (s *sandbox) command(argv ...string) *exec.Cmd {
	user := fmt.Sprintf("%d:%d", s.uid, s.gid)
	cmd := s.hostCommand(append([]string{s.tools["chroot"], "--userspec=" + user, "--groups=" + strconv.Itoa(s.gid), s.root}, argv...)...)
	cmd.Env = s.env
	childproc.Tie(cmd)
	return cmd
}

// lookupUser resolves a Dockerfile USER (name or id, optionally :group) in
// the image's own /etc/passwd and /etc/group, as a container runtime does.
func lookupUser(t *testing.T, root, user string) (uid, gid int) {
	t.Helper()
	u, g, hasGroup := strings.Cut(user, ":")
	if u == "" {
		t.Fatal("the image has no USER: it would run as root")
	}
	passwd := readDB(t, root, "passwd")
	entry := find(passwd, u)
	if entry == nil {
		t.Fatalf("USER %s is not in the image's /etc/passwd", u)
	}
	uid, _ = strconv.Atoi(entry[2])
	gid, _ = strconv.Atoi(entry[3])
	if hasGroup {
		ge := find(readDB(t, root, "group"), g)
		if ge == nil {
			t.Fatalf("USER group %s is not in the image's /etc/group", g)
		}
		gid, _ = strconv.Atoi(ge[2])
	}
	return uid, gid
}

// userHome returns the home directory of uid in the image's /etc/passwd.
func userHome(t *testing.T, root string, uid int) string {
	t.Helper()
	if e := find(readDB(t, root, "passwd"), strconv.Itoa(uid)); len(e) > 5 {
		return e[5]
	}
	return ""
}

// readDB reads the colon-separated entries of the image's /etc/name.
func readDB(t *testing.T, root, name string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "etc", name))
	if err != nil {
		t.Fatalf("the image's user database: %v", err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Split(sc.Text(), ":"); len(fields) >= 3 {
			out = append(out, fields)
		}
	}
	return out
}

// find returns the entry whose name (field 0) or id (field 2) is key.
func find(db [][]string, key string) []string {
	for _, e := range db {
		if e[0] == key || e[2] == key {
			return e
		}
	}
	return nil
}
