package consul

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// TestScale registers 2,000 services (each with a check, spread over 20
// nodes) on an agent that allows 40 connections per client, and checks that
// the source takes three quarters of them, never holds more, never gets a
// 429, and stays fast. It logs the figures.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("registers 2,000 services")
	}
	const services, nodes, agentLimit = 2000, 20, 40
	agent := consultest.Start(t, consultest.WithHCL(fmt.Sprintf("limits { http_max_conns_per_client = %d }", agentLimit)))
	c := agent.Client()
	registerMany(t, c, services, nodes)

	var cc connCounter
	var codes statusCounter
	start := time.Now()
	r := startSource(t, agent, map[string]any{"services": map[string]any{"include": []any{"scale-*"}}},
		func(s *Source) {
			s.dial = cc.dial
			s.wrap = codes.wrap
		})
	// The first sync of 2,000 services is the longest wait of these
	// tests.
	r.synced(2 * patience)
	r.mu.Lock()
	firstSync := r.full.Sub(start)
	got := len(r.state)
	r.mu.Unlock()
	if got != services {
		t.Fatalf("first sync has %d clusters, want %d", got, services)
	}
	syncReqs := codes.total()

	// A check going critical: the health watch names the service.
	before := codes.total()
	setCheck(t, c, 1000, nodes, api.HealthCritical)
	critical := r.waitFor(patience, "scale-1000 unhealthy", func() bool {
		e, ok := r.endpointsOf(svcName(1000))[uint32(10000+1000)]
		return ok && e.Health == sources.HealthUnhealthy
	})
	afterCritical := codes.total()
	// A second instance without checks, on a new node: the node's
	// appearance names it (one read of the node's services), before the
	// sweep its registration causes.
	if _, err := c.Catalog().Register(&api.CatalogRegistration{Node: "scale-extra", Address: "10.2.0.1",
		Service: &api.AgentService{ID: "extra", Service: svcName(1500), Port: 20000}}, nil); err != nil {
		t.Fatal(err)
	}
	sweep := r.waitFor(patience, "second instance of scale-1500", func() bool { return len(r.endpointsOf(svcName(1500))) == 2 })

	afterSweep := codes.total()
	// The sweep goes on after it found the instance and, with most
	// services unwatched, starts again; the checks below hold whenever
	// they are made, so the test does not wait for a pause in it.
	t.Logf("requests: %d for the critical check, %d until the instance without checks was seen", afterCritical-before, afterSweep-afterCritical)
	open, maxOpen, dialed := cc.figures()
	proc := procConns(t, agent.HTTPAddr)
	t.Logf("services=%d first sync %v (%d requests), critical check visible after %v, instance without checks after %v (sweep)",
		services, firstSync.Round(time.Millisecond), syncReqs, critical.Round(time.Millisecond), sweep.Round(time.Millisecond))
	t.Logf("connections to the agent: open now %d (/proc/net/tcp: %d), max open %d, dialed in total %d; limit %d, agent limit %d; responses %v",
		open, proc, maxOpen, dialed, r.src.plan.budget, agentLimit, codes.snapshot())
	// By default the source takes three quarters of what the agent allows.
	if want := agentLimit * 3 / 4; r.src.plan.budget != want {
		t.Errorf("the source may hold %d connections, want %d (3/4 of the agent's %d)", r.src.plan.budget, want, agentLimit)
	}
	if maxOpen > r.src.plan.budget || maxOpen >= agentLimit {
		t.Errorf("max open connections %d, want at most %d", maxOpen, r.src.plan.budget)
	}
	if n := codes.count(http.StatusTooManyRequests); n > 0 {
		t.Errorf("%d responses were 429", n)
	}
}

func svcName(i int) string { return fmt.Sprintf("scale-%04d", i) }

// registerMany registers n services, one instance each with a passing
// check, on `nodes` nodes, through transactions of 64 operations.
func registerMany(t testing.TB, c *api.Client, n, nodes int) {
	t.Helper()
	var ops api.TxnOps
	flush := func() {
		if len(ops) == 0 {
			return
		}
		ok, resp, _, err := c.Txn().Txn(ops, nil)
		if err != nil || !ok {
			t.Fatalf("registering: %v %+v", err, resp)
		}
		ops = nil
	}
	for i := range nodes {
		ops = append(ops, &api.TxnOp{Node: &api.NodeTxnOp{Verb: api.NodeSet,
			Node: api.Node{Node: fmt.Sprintf("scale-node-%d", i), Address: fmt.Sprintf("10.1.%d.1", i)}}})
	}
	flush()
	for i := range n {
		node := fmt.Sprintf("scale-node-%d", i%nodes)
		ops = append(ops,
			&api.TxnOp{Service: &api.ServiceTxnOp{Verb: api.ServiceSet, Node: node,
				Service: api.AgentService{ID: svcName(i), Service: svcName(i), Port: 10000 + i, Tags: []string{"scale"}}}},
			&api.TxnOp{Check: &api.CheckTxnOp{Verb: api.CheckSet, Check: api.HealthCheck{Node: node,
				CheckID: "check-" + svcName(i), Name: "check", Status: api.HealthPassing, ServiceID: svcName(i)}}})
		if len(ops) >= 64 {
			flush()
		}
	}
	flush()
}

func setCheck(t testing.TB, c *api.Client, i, nodes int, status string) {
	t.Helper()
	ok, resp, _, err := c.Txn().Txn(api.TxnOps{{Check: &api.CheckTxnOp{Verb: api.CheckSet, Check: api.HealthCheck{
		Node: fmt.Sprintf("scale-node-%d", i%nodes), CheckID: "check-" + svcName(i), Name: "check",
		Status: status, ServiceID: svcName(i)}}}}, nil)
	if err != nil || !ok {
		t.Fatalf("setting check: %v %+v", err, resp)
	}
}

// connCounter counts the connections the source's transport opens.
type connCounter struct {
	mu                   sync.Mutex
	open, maxOpen, total int
}

func (cc *connCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	cc.open++
	cc.total++
	cc.maxOpen = max(cc.maxOpen, cc.open)
	cc.mu.Unlock()
	return &countedConn{Conn: conn, cc: cc}, nil
}

func (cc *connCounter) figures() (open, maxOpen, total int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.open, cc.maxOpen, cc.total
}

type countedConn struct {
	net.Conn
	cc   *connCounter
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.cc.mu.Lock()
		c.cc.open--
		c.cc.mu.Unlock()
	})
	return c.Conn.Close()
}

// statusCounter counts the source's responses by status code.
type statusCounter struct {
	mu    sync.Mutex
	codes map[int]int
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (sc *statusCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err == nil {
			sc.mu.Lock()
			if sc.codes == nil {
				sc.codes = map[int]int{}
			}
			sc.codes[resp.StatusCode]++
			sc.mu.Unlock()
		}
		return resp, err
	})
}

func (sc *statusCounter) count(code int) int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.codes[code]
}

func (sc *statusCounter) total() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	n := 0
	for _, v := range sc.codes {
		n += v
	}
	return n
}

func (sc *statusCounter) snapshot() map[int]int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	m := map[int]int{}
	maps.Copy(m, sc.codes)
	return m
}

// procConns counts this process's established TCP connections to addr
// (127.0.0.1:port) in /proc/net/tcp: an independent check of connCounter.
// It counts the test's own client too, whose idle connections it closes
// first where it can; -1 when /proc is not readable.
func procConns(t testing.TB, addr string) int {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return -1
	}
	defer f.Close()
	want := fmt.Sprintf("0100007F:%04X", port)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local_address rem_address st ... inode (10th field)
		if len(fields) > 9 && fields[2] == want && fields[3] == "01" && inodes[fields[9]] {
			n++
		}
	}
	return n
}
