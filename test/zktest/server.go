// Package zktest starts a real ZooKeeper server for integration tests
// (Start): Debian's ZooKeeper (the zookeeper package that zookeeperd runs)
// on a free loopback port with a data directory of the test's own, its
// four-letter words mntr, wchs, cons and ruok enabled, and Stop/Restart so
// that tests can take it away and bring it back on the same port and data.
// It also has the registrars (registrar.go), which write exactly what
// Curator, Finagle and Aurora, Nerve and Dubbo write, and a counting TCP
// proxy (proxy.go) to bound a client's work during an outage.
//
// The server is found by Jar: $XDSBRIDGE_ZOOKEEPER (the path of
// zookeeper.jar, whose manifest names its dependencies), else Debian's
// /usr/share/java/zookeeper.jar; java must be on PATH. scripts/tools.sh
// installs both. Without them the test is skipped, or fails when
// XDSBRIDGE_INTEGRATION=required.
package zktest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/freeport"
	"github.com/xdsbridge/xdsbridge/test/testbin"
)

// DebianJar is where Debian's zookeeper package puts the server.
const DebianJar = "/usr/share/java/zookeeper.jar"

// Jar returns the path of zookeeper.jar and of java, or skips (fails, when
// XDSBRIDGE_INTEGRATION=required) the test when either is missing.
func Jar(t testing.TB) (jar, java string) {
	t.Helper()
	jar = os.Getenv("XDSBRIDGE_ZOOKEEPER")
	if jar == "" {
		jar = DebianJar
	}
	if _, err := os.Stat(jar); err != nil {
		testbin.Missing(t, fmt.Sprintf("no ZooKeeper server at %s (set XDSBRIDGE_ZOOKEEPER or run scripts/tools.sh)", jar))
	}
	java, err := exec.LookPath("java")
	if err != nil {
		testbin.Missing(t, "no java on PATH (scripts/tools.sh installs default-jre-headless)")
	}
	return jar, java
}

// Server is a running (or stopped) ZooKeeper server.
type Server struct {
	// Addr is host:port of the client port.
	Addr    string
	DataDir string

	t       testing.TB
	args    []string
	java    string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// TickTime is the server's tick: sessions may be as short as two ticks,
// so that tests can let a registrar's session expire quickly.
const TickTime = 100 * time.Millisecond

// Start runs a standalone server and returns once it answers; it is
// stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	jar, java := Jar(t)
	dir := t.TempDir()
	s := &Server{t: t, java: java, DataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "zookeeper.log"),
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freeport.Ports(t, 1)[0]))}
	_, port, _ := net.SplitHostPort(s.Addr)
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := fmt.Sprintf(`tickTime=%d
dataDir=%s
clientPort=%s
clientPortAddress=127.0.0.1
minSessionTimeout=%d
maxSessionTimeout=120000
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,mntr,wchs,cons,srvr
`, TickTime.Milliseconds(), s.DataDir, port, 2*TickTime.Milliseconds())
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// slf4j-simple (in Debian's libslf4j-java) logs to stderr, which goes
	// to the log file.
	s.args = []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", jar + ":/usr/share/java/slf4j-simple.jar", "org.apache.zookeeper.server.ZooKeeperServerMain", cfg}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.dumpLog()
		}
	})
	s.Restart()
	return s
}

// Restart starts the stopped server on its port and data directory and
// waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.java, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	childproc.Tie(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.t.Fatalf("starting zookeeper: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if out, err := s.FourLetter("ruok"); err == nil && out == "imok" {
			return
		}
		select {
		case <-done:
			s.t.Fatalf("zookeeper exited at start; log: %s", s.logPath)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("zookeeper did not answer within 60s; log: %s", s.logPath)
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL) and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// FourLetter sends a four-letter word and returns the answer.
func (s *Server) FourLetter(word string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, word); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}

func (s *Server) dumpLog() {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return
	}
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	s.t.Logf("zookeeper log (tail):\n%s", b)
}
