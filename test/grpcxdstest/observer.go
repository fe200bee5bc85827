package grpcxdstest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds/csds"

	"github.com/xdsbridge/xdsbridge/test/childproc"
	"github.com/xdsbridge/xdsbridge/test/syncbuf"
	"github.com/xdsbridge/xdsbridge/test/testwait"
)

// observerEnv names the services an observer process holds channels to;
// its presence is what makes a test binary an observer (see ObserverMain).
const observerEnv = "XDSBRIDGE_GRPC_OBSERVER"

// csdsLine starts the line an observer prints once it serves CSDS.
const csdsLine = "CSDS on "

// Observer is a process in which grpc-go holds a channel to
// xds:///<service> for each of a set of services, bootstrapped as an
// application is (GRPC_XDS_BOOTSTRAP_CONFIG, read by grpc-go's default
// xDS client pool), and serves grpc-go's CSDS, through which a test reads
// what that real xDS client accepted. It is the test binary run again
// (see ObserverMain): CSDS reports only the clients of grpc-go's
// process-wide default pool, whose bootstrap is read once per process, so
// an observer of one test's server needs a process of its own.
type Observer struct {
	t      testing.TB
	addr   string
	csds   statusv3.ClientStatusDiscoveryServiceClient
	stderr *syncbuf.Buffer
}

// ObserverMain must be the first statement of the TestMain of a package
// whose tests start observers. In the process StartObserver starts it
// runs the observer and exits; in any other it returns at once.
func ObserverMain() {
	services := os.Getenv(observerEnv)
	if services == "" {
		return
	}
	if err := observe(strings.Split(services, ","), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "grpc observer:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// observe opens the channels, serves CSDS, prints its address on out and
// returns when stop ends.
func observe(services []string, stop io.Reader, out io.Writer) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("serving CSDS: %w", err)
	}
	cs, err := csds.NewClientStatusDiscoveryServer()
	if err != nil {
		lis.Close()
		return fmt.Errorf("serving CSDS: %w", err)
	}
	s := grpc.NewServer()
	statusv3.RegisterClientStatusDiscoveryServiceServer(s, cs)
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()
	for _, svc := range services {
		conn, err := grpc.NewClient("xds:///"+svc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("creating the channel to xds:///%s: %w", svc, err)
		}
		defer conn.Close()
		// A channel resolves its target, and so subscribes to the
		// service's resources, only once it leaves idle.
		conn.Connect()
	}
	fmt.Fprintf(out, "%s%s\n", csdsLine, lis.Addr())
	// The test closes stdin to stop the observer; if the test binary dies
	// instead, the kernel kills the observer (see childproc).
	_, err = io.Copy(io.Discard, stop)
	return err
}

// StartObserver starts an observer bootstrapped against the xDS server at
// xdsAddr as node nodeID, with a channel to each of services, and stops it
// when the test ends. The test binary's TestMain must call ObserverMain.
func StartObserver(t testing.TB, xdsAddr, nodeID string, services ...string) *Observer {
	t.Helper()
	for _, s := range services {
		if s == "" || strings.Contains(s, ",") {
			t.Fatalf("observer: service name %q is empty or holds a comma", s)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := fmt.Sprintf(`{"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}], "node": {"id": %q}}`,
		xdsAddr, nodeID)
	// A binary whose TestMain lacks ObserverMain reads -test.run and runs
	// no test: it exits without the CSDS line, and the start fails.
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GRPC_XDS_BOOTSTRAP") // a file would win over the contents
	}), observerEnv+"="+strings.Join(services, ","), "GRPC_XDS_BOOTSTRAP_CONFIG="+bootstrap)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	o := &Observer{t: t, stderr: &syncbuf.Buffer{}}
	cmd.Stderr = o.stderr
	childproc.Tie(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the grpc observer: %v", err)
	}
	first, exited := make(chan string, 1), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		} else {
			first <- ""
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		timer := time.NewTimer(testwait.Patience)
		defer timer.Stop()
		var err error
		select {
		case err = <-exited:
		case <-timer.C:
			_ = cmd.Process.Kill()
			err = fmt.Errorf("still running %s after its stdin closed: %w", testwait.Patience, <-exited)
		}
		if err != nil {
			t.Errorf("grpc observer: %v", err)
		}
		if t.Failed() {
			t.Logf("grpc observer's stderr:\n%s", o.stderr)
		}
	})
	timer := time.NewTimer(testwait.Patience)
	defer timer.Stop()
	select {
	case line := <-first:
		addr, ok := strings.CutPrefix(line, csdsLine)
		if !ok {
			t.Fatalf("the grpc observer printed %q, not its CSDS address: does TestMain call grpcxdstest.ObserverMain?", line)
		}
		o.addr = addr
	case <-timer.C:
		t.Fatalf("the grpc observer did not serve CSDS within %s", testwait.Patience)
	}
	conn, err := grpc.NewClient(o.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	o.csds = statusv3.NewClientStatusDiscoveryServiceClient(conn)
	return o
}

// Status returns what the observer's xDS client holds or asked for (see
// ClientStatus), failing the test when CSDS does not answer.
func (o *Observer) Status() map[Key]ResourceStatus {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Patience)
	defer cancel()
	st, err := fetchStatus(ctx, o.csds, o.addr)
	if err != nil {
		o.t.Fatal(err)
	}
	return st
}

// WaitFor waits until cond holds of what the observer's client holds or
// asked for (see Status), failing the test after testwait.Patience with
// what and the last status seen.
func (o *Observer) WaitFor(what string, cond func(st map[Key]ResourceStatus) bool) {
	o.t.Helper()
	var last map[Key]ResourceStatus
	defer func() {
		if o.t.Failed() && last != nil {
			o.t.Logf("grpc-go's xDS client, last seen:\n%s", describe(last))
		}
	}()
	testwait.Eventually(o.t, testwait.Patience, what, func() bool {
		last = o.Status()
		return cond(last)
	})
}

// describe lists st one resource a line, sorted, with the endpoints grpc-go
// balances over for an assignment.
func describe(st map[Key]ResourceStatus) string {
	var lines []string
	for k, rs := range st {
		line := fmt.Sprintf("  %s %s: %s version %q", k.TypeURL, k.Name, rs.Status, rs.Version)
		if rs.Error != "" {
			line += fmt.Sprintf(", rejected version %q: %s", rs.ErrorVersion, rs.Error)
		}
		if eps, ok := Balanced(st, k.Name); ok && k.TypeURL == resourcev3.EndpointType {
			line += fmt.Sprintf(", balanced over %v", eps)
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// Endpoint is one endpoint of a ClusterLoadAssignment as grpc-go balances
// over it.
type Endpoint struct {
	Address                string
	Port, Weight, Priority uint32
}

// String is "address:port/weight/priority".
func (e Endpoint) String() string {
	return fmt.Sprintf("%s:%d/%d/%d", e.Address, e.Port, e.Weight, e.Priority)
}

// Balanced returns, sorted by String, the endpoints grpc-go balances
// calls over from the ClusterLoadAssignment named name in st, the last one
// the client ACKed, and false when it holds none. grpc-go ignores a
// locality without a weight and skips an endpoint whose health status is
// neither HEALTHY nor UNKNOWN (its xdsresource and cdsbalancer packages),
// so those are left out: what remains is where the calls may go.
func Balanced(st map[Key]ResourceStatus, name string) ([]Endpoint, bool) {
	rs := st[Key{resourcev3.EndpointType, name}]
	if rs.Status != "ACKED" || rs.Resource == nil {
		return nil, false
	}
	var cla endpointv3.ClusterLoadAssignment
	if err := rs.Resource.UnmarshalTo(&cla); err != nil {
		return nil, false
	}
	out := []Endpoint{}
	for _, l := range cla.GetEndpoints() {
		if l.GetLoadBalancingWeight().GetValue() == 0 {
			continue
		}
		for _, e := range l.GetLbEndpoints() {
			if h := e.GetHealthStatus().String(); h != "HEALTHY" && h != "UNKNOWN" {
				continue
			}
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			w := e.GetLoadBalancingWeight().GetValue()
			if w == 0 {
				w = 1 // grpc-go's default for an endpoint without a weight
			}
			out = append(out, Endpoint{sa.GetAddress(), sa.GetPortValue(), w, l.GetPriority()})
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return strings.Compare(a.String(), b.String()) })
	return out, true
}

// Gone reports whether the client in st holds the service name as
// removed: grpc-go found that neither its Listener nor its Cluster exists,
// so the channel fails its calls. The ClusterLoadAssignment of that name
// may stay ACKED: a SotW response that leaves one out does not remove it,
// and grpc-go keeps watching it while the channel still holds the cluster.
func Gone(st map[Key]ResourceStatus, name string) bool {
	if st[Key{resourcev3.ListenerType, name}].Status != "DOES_NOT_EXIST" {
		return false
	}
	cl, watched := st[Key{resourcev3.ClusterType, name}]
	return !watched || cl.Status == "DOES_NOT_EXIST"
}
