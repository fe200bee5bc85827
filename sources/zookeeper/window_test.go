package zookeeper

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/testwait"
	"github.com/xdsbridge/xdsbridge/test/zktest"
)

// gate sits between the loop and a real client. It counts the reads begun
// and ended and the most in flight at once, and holds the read of one
// path until released.
type gate struct {
	reader
	hold    string
	release chan struct{}

	mu                 sync.Mutex
	begun, ended, most int
	held               bool // the read of hold began
	atRelease          int  // reads begun when the held read was released
	existsW            int
}

func (g *gate) enter(path string) {
	g.mu.Lock()
	g.begun++
	g.most = max(g.most, g.begun-g.ended)
	hold := path == g.hold && !g.held
	g.held = g.held || hold
	g.mu.Unlock()
	if hold {
		<-g.release
		g.mu.Lock()
		g.atRelease = g.begun
		g.mu.Unlock()
	}
}

func (g *gate) exit() {
	g.mu.Lock()
	g.ended++
	g.mu.Unlock()
}

func (g *gate) ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	g.enter(path)
	defer g.exit()
	return g.reader.ChildrenW(path)
}

func (g *gate) GetW(path string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	g.enter(path)
	defer g.exit()
	return g.reader.GetW(path)
}

func (g *gate) ExistsW(path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	g.mu.Lock()
	g.existsW++
	g.mu.Unlock()
	g.enter(path)
	defer g.exit()
	return g.reader.ExistsW(path)
}

// counts returns the reads begun and ended.
func (g *gate) counts() (begun, ended int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.begun, g.ended
}

// TestReadWindow: the first read of a tree wider than the read window
// never has more than readWindow reads begun and not yet taken. The first
// service directory's read is held at the client while the rest of its
// window ends; no further read begins until the held one was answered and
// taken, however long that takes. Released, the read completes with every
// znode read once, in one Full update.
func TestReadWindow(t *testing.T) {
	srv := zktest.Start(t)
	r := zktest.NewRegistrar(t, srv.Addr, 30*time.Second)
	services := 3 * readWindow
	for i := range services {
		r.Curator("/services", fmt.Sprintf("svc-%03d", i), "id-0", fmt.Sprintf("10.3.%d.%d", i/200, i%200+1), 8000)
	}
	s, err := New(map[string]any{
		"servers":  []any{srv.Addr},
		"services": []any{map[string]any{"path": "/services", "format": "curator"}},
	}, sources.Options{Name: "zk"})
	if err != nil {
		t.Fatal(err)
	}
	in := newInbox()
	conn, _, err := zk.Connect(s.cfg.Servers, s.cfg.SessionTimeout, zk.WithLogger(zkLog{s.log}), zk.WithLogInfo(false),
		zk.WithEventCallback(in.event))
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{reader: conn, hold: "/services/svc-000", release: make(chan struct{})}
	release := sync.OnceFunc(func() { close(g.release) })
	ctx, cancel := context.WithCancel(t.Context())
	up := make(chan sources.Update, 1)
	done := make(chan error, 1)
	go func() { done <- newLoop(s, g, in).run(ctx, up) }()
	t.Cleanup(func() {
		release()
		cancel()
		conn.Close()
		<-done
	})

	// The base path, then the window's first readWindow directories; all
	// but the held one end.
	testwait.Eventually(t, testwait.Patience, "the first window of directory reads but the held one to end", func() bool {
		begun, ended := g.counts()
		return begun == 1+readWindow && ended == readWindow
	})
	release()
	var u sources.Update
	select {
	case u = <-up:
	case <-time.After(testwait.Patience):
		t.Fatal("no update after the held read was released")
	}
	if !u.Full || len(u.Services) != services {
		t.Fatalf("first update: full %v, %d services, want %d", u.Full, len(u.Services), services)
	}
	for _, svc := range u.Services {
		if len(svc.Endpoints) != 1 {
			t.Fatalf("%s has %d endpoints, want 1", svc.Name, len(svc.Endpoints))
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.atRelease != 1+readWindow {
		t.Fatalf("%d reads had begun when the held one was released, want %d: the base path and one window", g.atRelease, 1+readWindow)
	}
	if want := 1 + 2*services; g.begun != want || g.ended != want || g.existsW != 0 {
		t.Fatalf("%d reads begun, %d ended, %d existence watches; want %d reads (each znode once), none", g.begun, g.ended, g.existsW, want)
	}
	if g.most > readWindow {
		t.Fatalf("%d reads in flight at once, want at most the window, %d", g.most, readWindow)
	}
}
