package replicas

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/bench/consul"
	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/test/consultest"
	"github.com/xdsbridge/xdsbridge/test/freeport"
)

// Config is the replicas scenario: bridge replicas that share one
// fleet of delta clients behind a TCP balancer, each replica reading its
// own Consul client agent, under churn, with one replica killed and later
// restarted.
type Config struct {
	// ConsulBin and BridgeBin are the binaries; Self is xdsload itself,
	// run as the balancer (`xdsload balance`).
	ConsulBin, BridgeBin, Self  string
	Replicas, Clients, Services int
	// Rate is changes per second, each re-registering one instance of a
	// random service that has not changed for Quiet.
	Rate  float64
	Quiet time.Duration
	// Reads is how long the Consul server's reads are counted under
	// churn with one replica, before the others start; Idle how long
	// they are counted before that churn (and before the warm-up's) with
	// nothing changing.
	Reads, Idle time.Duration
	// Warmup is the churn with every replica up before the kill; After
	// runs on once every moved client is current; Spread follows the
	// killed replica's restart.
	Warmup, After, Spread time.Duration
	// MaxConnectionAge is the replicas' xds.keepalive.max_connection_age;
	// 0 leaves the key out (the default).
	MaxConnectionAge time.Duration
	// Balancer is how clients reach the replicas: "client" (each picks
	// the next ready replica for every new connection, as Envoy balances
	// its xDS cluster) or "proxy" (a TCP balancer process between them).
	Balancer string
	// TLS points each replica at its agent's HTTPS port (HTTP/2), as the
	// Consul source's documentation recommends for watching many
	// services; else plain HTTP.
	TLS     bool
	Timeout time.Duration // bound of each wait
	OutDir  string
	Logger  *slog.Logger `json:"-"`
}

// Result is what the scenario measured.
type Result struct {
	Config Config
	// Load is /proc/loadavg at the start and at the end.
	Load [2]string
	// Setup is the registration's time; Served the fleet's, from its
	// start until every client held every cluster and assignment.
	Setup, Served time.Duration
	// Reads are the Consul server's RPC counters with one replica and
	// with all of them (during the warm-up).
	Reads [2]serverReads
	// Moved counts the clients on the killed replica; Window is from the
	// kill until the last of them was current (WindowOK false: one never
	// was); Lacked the changes they had to be sent; FirstResponse the
	// slowest first response of a moved client's new stream.
	Moved         int
	Window        time.Duration
	WindowOK      bool
	Lacked        int
	FirstResponse time.Duration
	// MovedGot sums what the moved clients received on their new streams
	// until the end; LaterGot the same for every client's streams after
	// any reconnect; FirstGot what every client received on its first
	// stream after its initial state.
	MovedGot, LaterGot, FirstGot receiptSums
	Reconnects                   int
	// Reconnected is p50, p99 and max over the moved clients of the time
	// from the kill until each had a stream open on another replica;
	// Current the same until each was current there.
	Reconnected, Current [3]time.Duration
	// Steps are p50, p99 and max of the moved clients' ways back: from
	// seeing the stream end to opening another (Envoy's retry wait),
	// from that to the stream being open, and from that to being current.
	Steps [3][3]time.Duration
	// Lag is p50, p99 and max over the warm-up's changes of how far apart
	// the replicas delivered each (see ledger.replicaLag).
	Lag [3]time.Duration
	// Gap is p50, p99 and max of a reconnect's time from the client
	// seeing its stream end to the first response on the next.
	Gap [3]time.Duration
	// Phases are the change latencies by when the change was made.
	Phases []phaseLatency
	// Missing counts client·change pairs never received; Superseded those
	// received only through a later change of the same service; Failed
	// the changes Consul refused; Unreadable assignments the harness could
	// not decode.
	Missing, Superseded, Failed, Made int
	Unreadable                        int64
	// Removed counts the names any client was told are gone
	// (removed_resources) and Short the assignments any client received
	// with fewer endpoints than every service has: the registry removes
	// nothing, so each is an endpoint a client saw go missing. A version
	// going backwards is a revert (receiptSums.Reverts).
	Removed, Short int64
	// Wrong counts clients whose final state differs from the registry
	// (FirstWrong says how the first differs).
	Wrong      int
	FirstWrong string
	// Spread samples the clients per replica every second, from the
	// fleet's start, with times relative to the restart.
	Spread []spreadSample
	Usage  []usage
}

// serverReads are the Consul server's RPC counters over Minutes of churn
// (Changes made) and, before it, over IdleMinutes with nothing changing.
type serverReads struct {
	Replicas           int
	RPC, Query         float64
	Changes            int
	Minutes            float64
	IdleRPC, IdleQuery float64
	IdleMinutes        float64
	// Unread says why the counters could not be read (the RPC figures
	// are then left at zero).
	Unread string `json:",omitempty"`
}

// perChange is the server's RPCs per change: all of them, and net of
// the rate they run at with nothing changing.
func (s serverReads) perChange() (all, net float64) {
	n := max(float64(s.Changes), 1)
	idle := 0.0
	if s.IdleMinutes > 0 {
		idle = s.IdleRPC / s.IdleMinutes * s.Minutes
	}
	return s.RPC / n, (s.RPC - idle) / n
}

type receiptSums struct{ Clusters, Assignments, Fresh, Again, Reverts, Reapplied int64 }

// Resent is what was received that brought nothing the client lacked.
func (s receiptSums) Resent() int64 { return s.Clusters + s.Again + s.Reverts + s.Reapplied }

type phaseLatency struct {
	Name                    string
	Changes, Pairs, Missing int
	P50, P99, Max           time.Duration // client·change latencies
	ConvP99, ConvMax        time.Duration // each change's slowest client
}

type spreadSample struct {
	At      time.Duration
	Clients []int
}

// usage is the CPU that each process used in a phase and its RSS at the
// phase's end.
type usage struct {
	Phase   string
	Seconds float64
	CPU     map[string]time.Duration
	RSS     map[string]int64
}

// replicaRun is one run's moving parts.
type replicaRun struct {
	cfg     Config
	log     *slog.Logger
	top     *consul.Topology
	agents  []string // per replica: its agent's address as the bridge reads it
	capi    *api.Client
	nodes   map[int]string // service -> catalog node
	l       *ledger
	bridges []*replica
	rt      *route
	fleet   *roamFleet
	// stopFleet ends the fleet's supervisor (then fleet.close ends the
	// clients).
	stopFleet context.CancelFunc
	res       *Result
	cpu       map[process]time.Duration // at the start of the current phase
	phaseAt   time.Time
}

// replica is one bridge process.
type replica struct {
	name, conf, xds, admin string
	cmd                    *exec.Cmd // nil while not running
	starts                 int
}

// Run runs the scenario. Every process it starts is stopped
// before it returns, also when ctx ends early.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &replicaRun{cfg: cfg, log: log, res: &Result{Config: cfg, Load: [2]string{proc.LoadLine(), ""}}}
	dir, err := os.MkdirTemp("", "xdsload-replicas-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer r.stop()
	if err := r.setup(ctx, dir); err != nil {
		return nil, err
	}
	if err := r.failover(ctx); err != nil {
		return nil, err
	}
	r.res.Load[1] = proc.LoadLine()
	return r.res, nil
}

// setup starts Consul, registers the services, counts the server's reads
// with one replica, starts the others, the balancer and the fleet.
func (r *replicaRun) setup(ctx context.Context, dir string) error {
	cfg := r.cfg
	top, err := consul.StartTopology(consul.EventsConfig{ConsulBin: cfg.ConsulBin, Topology: "cluster", TLS: cfg.TLS, OutDir: cfg.OutDir}, dir)
	r.top = top
	if err != nil {
		return err
	}
	agents := [][2]string{{top.Agent, top.AgentHTTPS}}
	for i := 1; i < cfg.Replicas; i++ {
		h, s, err := top.Join(fmt.Sprintf("client-%d", i))
		if err != nil {
			return err
		}
		agents = append(agents, [2]string{h, s})
	}
	tr := consul.HarnessTransport()
	for _, a := range agents {
		c, err := consul.HarnessClient(a[0], tr)
		if err != nil {
			return err
		}
		if err := proc.Poll(ctx, cfg.Timeout, func() bool { l, err := c.Status().Leader(); return err == nil && l != "" }); err != nil {
			return fmt.Errorf("waiting for agent %s to know the leader: %w", a[0], err)
		}
		r.agents = append(r.agents, a[0])
		if cfg.TLS {
			r.agents[len(r.agents)-1] = "https://" + a[1]
		}
	}
	// The harness writes through the server agent: it stands for the
	// registry's writers, not for a replica's agent.
	if r.capi, err = consul.HarnessClient(top.Server, tr); err != nil {
		return err
	}
	t0 := time.Now()
	if err := consul.RegisterAll(ctx, r.capi, consul.EventsConfig{Services: cfg.Services}); err != nil {
		return err
	}
	r.res.Setup = time.Since(t0)
	if err := r.findNodes(); err != nil {
		return err
	}
	r.log.Info("registered", "services", cfg.Services, "took", r.res.Setup.Round(time.Millisecond))

	total := cfg.Reads + cfg.Warmup + cfg.After + cfg.Spread + 4*cfg.Timeout
	r.l = newLedger(cfg.Clients, cfg.Services, int(total.Seconds()*cfg.Rate)+100, time.Now().Add(-time.Second))
	if err := r.startReplica(ctx, 0); err != nil {
		return err
	}
	idle, err := r.idleReads(ctx)
	if err != nil {
		return err
	}
	stopChurn := r.churning(ctx)
	r.res.Reads[0], err = r.countReads(ctx, idle, cfg.Reads)
	stopChurn()
	if err != nil {
		return err
	}
	for i := 1; i < cfg.Replicas; i++ {
		if err := r.startReplica(ctx, i); err != nil {
			return err
		}
	}
	if r.rt, err = startRoute(ctx, cfg.Balancer, cfg.Self, r.bridges, filepath.Join(cfg.OutDir, "balancer.log"), cfg.Timeout); err != nil {
		return err
	}
	t1 := time.Now()
	var fctx context.Context
	fctx, r.stopFleet = context.WithCancel(ctx)
	if r.fleet, err = startRoamFleet(fctx, r.rt.addr, r.rt.dial, cfg.Clients, cfg.Services, r.l); err != nil {
		return err
	}
	if err := proc.Poll(ctx, 10*time.Minute, func() bool { return r.fleet.served() == cfg.Clients }); err != nil {
		return fmt.Errorf("%d of %d clients served: %w", r.fleet.served(), cfg.Clients, err)
	}
	r.res.Served = time.Since(t1)
	r.log.Info("fleet served", "clients", cfg.Clients, "took", r.res.Served.Round(time.Millisecond), "spread", r.rt.book.counts())
	r.rt.book.sample(ctx)
	return nil
}

// findNodes maps each service to the catalog node registerAll put it on.
func (r *replicaRun) findNodes() error {
	r.nodes = map[int]string{}
	for b := 0; len(r.nodes) < r.cfg.Services; b++ {
		n, _, err := r.capi.Catalog().Node(consul.BulkNode(b), nil)
		if err != nil {
			return fmt.Errorf("reading node %s: %w", consul.BulkNode(b), err)
		}
		if n == nil {
			return fmt.Errorf("node %s missing with %d of %d services found", consul.BulkNode(b), len(r.nodes), r.cfg.Services)
		}
		for _, s := range n.Services {
			num, _ := strings.CutPrefix(s.Service, "svc-")
			if i, err := strconv.Atoi(num); err == nil {
				r.nodes[i] = n.Node.Node
			}
		}
	}
	return nil
}

// startReplica starts (or restarts) bridge i on its agent and waits until
// it is ready with the source synced.
func (r *replicaRun) startReplica(ctx context.Context, i int) error {
	if i == len(r.bridges) {
		p, err := freeport.Take(2)
		if err != nil {
			return err
		}
		b := &replica{name: fmt.Sprintf("replica-%d", i), xds: "127.0.0.1:" + strconv.Itoa(p[0]), admin: "127.0.0.1:" + strconv.Itoa(p[1])}
		b.conf = filepath.Join(r.cfg.OutDir, b.name+".yaml")
		if err := os.WriteFile(b.conf, []byte(r.bridgeYAML(b, r.agents[i])), 0o644); err != nil {
			return err
		}
		r.bridges = append(r.bridges, b)
	}
	b := r.bridges[i]
	b.starts++
	logf := filepath.Join(r.cfg.OutDir, b.name+".log")
	if b.starts > 1 {
		logf = filepath.Join(r.cfg.OutDir, fmt.Sprintf("%s.start-%d.log", b.name, b.starts))
	}
	cmd, err := proc.Start(logf, r.cfg.BridgeBin, "run", "--config", b.conf)
	if err != nil {
		return err
	}
	b.cmd = cmd
	t0 := time.Now()
	synced := func() bool {
		v, err := proc.ScrapeSample("http://"+b.admin+"/metrics", `xdsbridge_source_synced{source="consul"}`)
		return err == nil && v == 1
	}
	if err := proc.Poll(ctx, r.cfg.Timeout, func() bool { return proc.BridgeReady(b.admin)() && synced() }); err != nil {
		return fmt.Errorf("waiting for %s to be ready and synced: %w", b.name, err)
	}
	r.log.Info("replica ready", "replica", b.name, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// bridgeYAML is a replica's configuration: the defaults but for the
// listeners, the source's address (and its CA) and, in a variant,
// max_connection_age.
func (r *replicaRun) bridgeYAML(b *replica, agent string) string {
	keep := ""
	if r.cfg.MaxConnectionAge > 0 {
		keep = fmt.Sprintf("\n  keepalive: {max_connection_age: %s}", r.cfg.MaxConnectionAge)
	}
	tls := ""
	if r.cfg.TLS {
		tls = fmt.Sprintf(", tls: {ca_file: %q}", r.top.CAFile)
	}
	return fmt.Sprintf("xds:\n  listen: %q%s\nadmin: {listen: %q}\nsources:\n  - {name: consul, type: consul, address: %q%s}\n",
		b.xds, keep, b.admin, agent, tls)
}

// serverMetrics reads the Consul server agent's metrics, trying again
// until a read succeeds or cfg.Timeout passes: on a loaded machine one
// read can outlast the reader's own deadline.
func (r *replicaRun) serverMetrics(ctx context.Context) (map[string]float64, error) {
	var m map[string]float64
	var err error
	perr := proc.Poll(ctx, r.cfg.Timeout, func() bool {
		if m, err = consultest.Metrics(r.top.Server); err != nil {
			r.log.Warn("reading the Consul server's metrics", "err", err)
		}
		return err == nil
	})
	if perr != nil {
		return nil, fmt.Errorf("reading the Consul server's metrics: %w (last: %w)", perr, err)
	}
	return m, nil
}

// serverGrowth reads the Consul server's RPC counters, waits d and reads
// them again. A read that still fails after cfg.Timeout leaves the growth
// uncounted (unread says why) but the wait still takes place: the
// server's reads are one figure of the run, not a reason to abandon it.
func (r *replicaRun) serverGrowth(ctx context.Context, d time.Duration) (rpc, query, minutes float64, unread string, err error) {
	m0, err0 := r.serverMetrics(ctx)
	t0 := time.Now()
	if err := sleep(ctx, d); err != nil {
		return 0, 0, 0, "", err
	}
	m1, err1 := r.serverMetrics(ctx)
	if ctx.Err() != nil {
		return 0, 0, 0, "", ctx.Err()
	}
	minutes = time.Since(t0).Minutes()
	if err := errors.Join(err0, err1); err != nil {
		r.log.Warn("the Consul server's reads not counted", "err", err)
		return 0, 0, minutes, err.Error(), nil
	}
	return m1["consul_rpc_request"] - m0["consul_rpc_request"], m1["consul_rpc_query"] - m0["consul_rpc_query"], minutes, "", nil
}

// idleReads counts the Consul server's RPCs over cfg.Idle with nothing
// changing.
func (r *replicaRun) idleReads(ctx context.Context) (serverReads, error) {
	out := serverReads{Replicas: r.running()}
	var err error
	out.IdleRPC, out.IdleQuery, out.IdleMinutes, out.Unread, err = r.serverGrowth(ctx, r.cfg.Idle)
	return out, err
}

// countReads adds to out the Consul server's RPCs and the changes made
// over d (the caller churns meanwhile).
func (r *replicaRun) countReads(ctx context.Context, out serverReads, d time.Duration) (serverReads, error) {
	k0 := r.l.made.Load()
	rpc, query, minutes, unread, err := r.serverGrowth(ctx, d)
	if err != nil {
		return out, err
	}
	out.RPC, out.Query, out.Minutes, out.Changes = rpc, query, minutes, int(r.l.made.Load()-k0)
	if unread != "" {
		out.Unread = unread
	}
	r.log.Info("server reads", "replicas", out.Replicas, "changes", out.Changes, "rpc", out.RPC, "query", out.Query, "unread", out.Unread)
	return out, nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// churning runs churn until the returned stop is called, which waits for
// it to end.
func (r *replicaRun) churning(ctx context.Context) (stop func()) {
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.churn(cctx) })
	return func() { cancel(); wg.Wait() }
}

func (r *replicaRun) running() int {
	n := 0
	for _, b := range r.bridges {
		if b.cmd != nil {
			n++
		}
	}
	return n
}

// churn makes changes at cfg.Rate until ctx ends: each re-registers
// instance 0 of a random service that has not changed for cfg.Quiet on
// the port that names the change, through the server agent. Writes run
// concurrently (as a registry's many writers do), so that a slow one
// does not lower the rate; churn returns once they are done.
func (r *replicaRun) churn(ctx context.Context) {
	t := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
	defer t.Stop()
	var writes sync.WaitGroup
	defer writes.Wait()
	slots := make(chan struct{}, 32)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		svc := rand.N(r.cfg.Services)
		for try := 0; try < 20 && time.Since(r.l.lastChanged(svc)) < r.cfg.Quiet; try++ {
			svc = rand.N(r.cfg.Services)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		k := r.l.make(svc, time.Now())
		if k == 0 {
			return
		}
		writes.Go(func() {
			defer func() { <-slots }()
			r.write(svc, k)
		})
	}
}

// write makes change k on service svc. The write is not cut short when
// the churn stops: a write whose fate is unknown would leave the ledger
// unsure of the registry's state. A write that fails is checked against
// the catalog, since it may have been applied all the same.
func (r *replicaRun) write(svc int, k int32) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	inst := consul.Instance(svc, 0, markerBase+int(k), false)
	_, err := r.capi.Catalog().Register(&api.CatalogRegistration{Node: r.nodes[svc], SkipNodeUpdate: true,
		Service: &api.AgentService{ID: inst.ID, Service: inst.Name, Address: inst.Address, Port: inst.Port}},
		(&api.WriteOptions{}).WithContext(ctx))
	if err == nil {
		return
	}
	got, _, rerr := r.capi.Catalog().Service(inst.Name, "", (&api.QueryOptions{}).WithContext(ctx))
	applied := rerr == nil && slices.ContainsFunc(got, func(s *api.CatalogService) bool { return s.ServiceID == inst.ID && s.ServicePort == inst.Port })
	if !applied {
		r.l.fail(k)
		r.log.Warn("change refused", "change", k, "service", inst.Name, "err", err)
	}
}

// stop ends every process the run started.
func (r *replicaRun) stop() {
	if r.fleet != nil {
		r.stopFleet()
		r.fleet.close()
	}
	if r.rt != nil {
		r.rt.stop()
	}
	for _, b := range r.bridges {
		if b.cmd != nil {
			proc.Stop(b.cmd)
		}
	}
	if r.top != nil {
		r.top.Stop()
	}
}
