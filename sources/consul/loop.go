package consul

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

// svcKey names one Consul service in one watched datacenter.
type svcKey struct {
	dc   int
	name string
}

// checkKey names one check of the catalog.
type checkKey struct{ node, id string }

// svcState is the loop's record of one selected service: what it knows
// of the service, and every read, retry, watch and sweep the service has
// pending. Forgetting a service is deleting its record (removeService);
// the loop's queues of keys skip a key whose record is gone.
type svcState struct {
	key     svcKey
	tags    []string // from /v1/catalog/services (union over instances)
	cluster string   // rendered cluster_name
	fetched bool     // read successfully at least once
	mesh    bool     // only proxies or gateways: not served (keep_mesh)
	index   uint64   // X-Consul-Index of the read applied last
	// peekIndex: the index the last peek of a sweep saw (sweep.go).
	peekIndex uint64
	// changedAt: when a read last changed what is served (watch.go gives
	// watches to the services that changed last).
	changedAt time.Time
	dropped   int // instances the last read left out as unservable
	eps       []sources.Endpoint
	// What the last read showed, to tell which later health and node
	// changes concern this service.
	nodes  map[string]uint64   // node name -> node ModifyIndex
	checks map[checkKey]string // check -> status
	// hostLogged: its instances with a host name were logged (notes.go).
	hostLogged bool

	// dirty is the priority of the read to make (prioNone: none); the key
	// is then in that priority's queue, or is put there when the read in
	// flight returns (see queueRead).
	dirty    readPrio
	inflight bool
	// want is the index a read must reach to reflect the check change
	// that queued it; a read answering below it (a lagging server, or the
	// agent cache not yet refreshed) is repeated after behindDelay, up to
	// behindRetries times. viaCache marks a read queued only by such check
	// changes: the only ones that may use the agent cache (cached: true).
	want     uint64
	behind   int
	viaCache bool
	// retry: the last read failed, and this is its retry (retry.go).
	retry *readRetry
	// watch: the service's watch (watch.go), nil when it has none.
	watch *watchRun
	// sweep: the running sweep waits for a read of the service (sweep.go).
	sweep *sweepRun
}

// dcState is what the loop knows of one datacenter.
type dcState struct {
	name        string
	m           mapping
	catalogSeen bool
	services    map[string]*svcState
	checks      map[checkKey]checkInfo // last /v1/health/state/any; nil before the first
	// census: what the last census saw (census.go), nil before the
	// first; censusDump: it was a dump; dumped: a dump that ACLs did not
	// filter, so sweeps are not needed.
	census             map[censusKey]censusEntry
	censusDump, dumped bool
}

type checkInfo struct {
	status, service, node string
	index                 uint64 // ModifyIndex
}

// fetchResult is the outcome of one /v1/health/service read.
type fetchResult struct {
	key     svcKey
	st      *svcState // the state the read was started for
	seq     uint64    // dispatch sequence number
	epoch   uint64    // the resets before it started (loop.epoch)
	entries []*api.ServiceEntry
	meta    *api.QueryMeta
	cached  bool // read from the agent cache
	index   uint64
	err     error
	// sweep: a read of a sweep (sweep.go), paced; peek: it asked for the
	// service's index only. took is its round trip.
	sweep, peek bool
	took        time.Duration
	// watch is set on the answers of a watch (watch.go); such answers
	// are not reads of the queue.
	watch *watchRun
}

// delayedRead is a read to queue at a later time.
type delayedRead struct {
	at  time.Time
	key svcKey
}

const (
	behindDelay   = 50 * time.Millisecond
	behindRetries = 20
)

// loop owns all the source's state; only its goroutine touches it.
type loop struct {
	ctx     context.Context
	s       *Source
	c       *api.Client
	w       *watchSet
	dcs     []*dcState
	wg      *sync.WaitGroup
	results chan fetchResult
	started time.Time

	// lastDump is the last census that was a dump (census.go), for the
	// status; nil before the first.
	lastDump *census
	// queue: the keys of the services to read, in order, one queue per
	// priority (see queueRead); inflight: how many reads are in flight.
	queue    [prioCount][]svcKey
	inflight int
	slots    int // reads in flight at most (connPlan.reads)
	seq      uint64
	// retries holds the retries of the reads that failed, in the order
	// they failed; each belongs to its service's record (see retry.go).
	retries  []*readRetry
	readGap  time.Duration
	paceAt   time.Time // pacing: no read starts before this
	nextRead time.Time // pacing: the earliest start of the next read
	later    []delayedRead

	sweepWanted map[int]bool // datacenters to sweep
	sweep       *sweepRun
	nextSweep   time.Time
	confirmNext bool // the next sweep confirms a cached one (endSweep)
	// sweeping: sweep reads in flight; pacer spaces them (sweep.go).
	sweeping  int
	pacer     pacer
	lastSweep sweepRecord

	// pollErr, the retries, the watches and the agent's phase say what
	// fails now (failingNow); kick asks the probe to look soon.
	pollErr map[[2]int]bool
	kick    chan struct{}
	// leaderless: the last answer said X-Consul-KnownLeader: false.
	leaderless bool
	// agent: what the loop knows of the agent: its phase (agentPhase),
	// identity and resets; epoch: the resets so far. An answer to a
	// request started before the last reset is of the lost state, and is
	// not applied.
	agent agentState
	epoch uint64
	// aclFiltered: reads whose last answer had results hidden by ACLs.
	aclFiltered map[string]bool

	// members: the services feeding each cluster. It spans services (a
	// cluster merges the services of several datacenters, or several
	// services whose cluster_name renders the same name), and building a
	// cluster must find its services without looking at every record.
	members   map[string]map[svcKey]bool
	changed   map[string]bool // clusters to compare and publish
	published map[string]sources.Service
	synced    bool
}

func newLoop(ctx context.Context, s *Source, c *api.Client, w *watchSet, dcNames []string, wg *sync.WaitGroup) *loop {
	l := &loop{
		ctx: ctx, s: s, c: c, w: w, wg: wg, started: time.Now(),
		results:     make(chan fetchResult),
		slots:       s.plan.reads,
		kick:        make(chan struct{}, 1),
		aclFiltered: map[string]bool{},
		readGap:     readGap(s.cfg.MaxReadRate),
		pollErr:     map[[2]int]bool{},
		sweepWanted: map[int]bool{},
		members:     map[string]map[svcKey]bool{},
		changed:     map[string]bool{},
		published:   map[string]sources.Service{},
	}
	for i, name := range dcNames {
		prio := s.cfg.priority(i, name)
		l.dcs = append(l.dcs, &dcState{
			name:     name,
			services: map[string]*svcState{},
			m: mapping{
				addressSource:   s.cfg.AddressSource,
				warningDegraded: s.cfg.Warning == WarningDegrade,
				criticalDrop:    s.cfg.Critical == CriticalDrop,
				keepMesh:        s.cfg.KeepMesh,
				locality:        s.cfg.Locality,
				datacenter:      name,
				priority:        prio,
			},
		})
	}
	return l
}

func (l *loop) run(ctx context.Context, polls <-chan pollResult, probes <-chan probeResult, up chan<- sources.Update) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var tokenTick <-chan time.Time
	if l.s.cfg.TokenFile != "" {
		t := time.NewTicker(tokenCheckInterval)
		defer t.Stop()
		tokenTick = t.C
	}
	for {
		l.promoteDue()
		l.maybeSweep()
		l.dispatch(ctx)
		if !l.publish(ctx, up) {
			return ctx.Err()
		}
		l.checkRecovered()
		l.arm(timer)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-polls:
			l.onPoll(r)
		case r := <-l.results:
			l.onFetch(r)
		case r := <-probes:
			l.onProbe(r)
		case <-tokenTick:
			l.reloadToken()
		case <-timer.C:
		}
	}
}

// arm sets timer to the next moment the loop has something to do by
// itself: the end of a read backoff or the start of a deferred sweep.
func (l *loop) arm(t *time.Timer) {
	var next time.Time
	if l.queued() && l.paceAt.After(time.Now()) {
		next = l.paceAt
	}
	if at := l.sweepWake(); !at.IsZero() && (next.IsZero() || at.Before(next)) {
		next = at
	}
	for _, r := range l.retries {
		if l.live(r) && !r.at.IsZero() && (next.IsZero() || r.at.Before(next)) {
			next = r.at
		}
	}
	if len(l.sweepWanted) > 0 && l.sweep == nil && (next.IsZero() || l.nextSweep.Before(next)) {
		next = l.nextSweep
	}
	for _, d := range l.later {
		if next.IsZero() || d.at.Before(next) {
			next = d.at
		}
	}
	d := time.Hour
	if !next.IsZero() {
		d = max(time.Until(next), time.Millisecond)
	}
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

func (l *loop) onPoll(r pollResult) {
	if r.epoch != l.epoch {
		return // asked before the last reset; asked again since
	}
	if r.census != nil {
		l.onCensus(r.dc, r.census)
		return
	}
	key := [2]int{r.dc, int(r.kind)}
	d := l.dcs[r.dc]
	if r.err != nil {
		l.pollErr[key] = true
		l.fail(r.err)
		return
	}
	delete(l.pollErr, key)
	if l.answered() {
		return
	}
	l.noteLeader(r.meta)
	if r.unchanged {
		return
	}
	if r.reset {
		// The index went backwards (a snapshot restore, a cluster
		// rebuilt, an agent restarted empty): the state may be refilling.
		l.noteReset(fmt.Sprintf("the index of %s in %s went backwards", r.kind, d.name))
	}
	switch r.kind {
	case pollServices:
		l.noteACLFiltered(r.meta.ResultsFilteredByACLs, "catalog services in "+d.name)
		l.onServices(r.dc, r.services, r.meta.ResultsFilteredByACLs)
	case pollChecks:
		l.onChecks(r.dc, r.checks)
	case pollNodes:
		l.onNodes(r.dc, r.nodes)
		l.signalNamed(r.dc, r.onNew)
	}
}

// signalNamed queues a read of each of the named services of datacenter dc
// that it has (see markSignal).
func (l *loop) signalNamed(dc int, names []string) {
	for _, name := range names {
		if st := l.dcs[dc].services[name]; st != nil {
			l.markSignal(st)
		}
	}
}

func (l *loop) onFetch(r fetchResult) {
	if r.watch != nil {
		l.onWatch(r)
		return
	}
	st := r.st
	st.inflight = false
	l.inflight--
	if r.sweep {
		l.sweeping--
		l.pacer.spend(r.peek, r.took, time.Now())
	}
	if l.dcs[r.key.dc].services[r.key.name] != st {
		// Removed (or removed and added again: a new record, read on
		// its own) meanwhile: stale.
		return
	}
	// A read queued while this one was in flight was not put in the queue
	// (see queueRead); it goes there now, whatever happens below.
	defer l.requeue(st)
	if errors.Is(r.err, errRenewed) || r.epoch != l.epoch {
		// Cut short, or an answer about the state Consul lost.
		l.markDirty(st)
		return
	}
	if r.err != nil {
		l.fail(r.err)
		l.retryLater(st)
		l.sweptOne(st, r.seq)
		return
	}
	st.retry = nil // its own success ends its backoff
	if l.answered() {
		l.markDirty(st)
		return
	}
	if r.peek {
		l.onPeek(r, st)
		return
	}
	before := st.changedAt
	if !l.apply(r, st) {
		return
	}
	l.sweptOne(st, r.seq)
	l.maybeWatch(st, st.changedAt != before)
}

// apply serves what a read or a watch answered about st, unless the
// answer is older than what is served (then the service is read again
// shortly, and apply reports false).
func (l *loop) apply(r fetchResult, st *svcState) bool {
	d := l.dcs[r.key.dc]
	if !r.cached && r.watch == nil {
		// Answers from the agent's cache or its streaming views (what a
		// watch gets from an agent with the streaming backend) do not
		// say whether the servers know a leader; the bulk queries and
		// the other reads do.
		l.noteLeader(r.meta)
	}
	if st.fetched && r.index < st.index {
		// Older than what was applied: a stale read from a lagging
		// server. Read again rather than serve the past, unless it stays
		// so (then the cluster's state was reset: accept it).
		if n := st.behind + 1; n <= behindRetries {
			st.behind = n
			l.later = append(l.later, delayedRead{at: time.Now().Add(behindDelay), key: r.key})
			return false
		}
		st.behind = 0
	}
	st.index = r.index
	switch n := st.behind + 1; {
	case r.index >= st.want:
		st.want, st.behind = 0, 0
	case n <= behindRetries:
		// Behind the check change that queued it: apply what it says
		// and read again.
		st.behind = n
		l.later = append(l.later, delayedRead{at: time.Now().Add(behindDelay), key: r.key})
	default:
		l.s.log.Debug("reads of a service stay behind its checks; giving up", "service", r.key.name, "index", r.index, "want", st.want)
		st.want, st.behind = 0, 0
	}
	eps, dropped, hostnames := d.m.endpoints(r.entries)
	if r.meta.ResultsFilteredByACLs {
		// The token may have lost rights to some instances: additions
		// are served, removals wait for an answer that hides nothing.
		eps = keepMissing(eps, st.eps)
	}
	l.noteACLFiltered(r.meta.ResultsFilteredByACLs, "service "+r.key.name+" in "+d.name)
	// Unservable instances count once per change of the service, not
	// once per read: a sweep re-reading an unchanged service adds nothing.
	if dropped > 0 && (!st.fetched || dropped != st.dropped || !endpointsEqual(st.eps, eps)) {
		l.s.status.Dropped(dropped)
		l.noteDropped(st, dropped, hostnames)
	}
	st.dropped = dropped
	if mesh := !l.s.cfg.KeepMesh && meshOnly(r.entries); mesh != st.mesh {
		st.mesh = mesh
		l.changed[st.cluster] = true
	}
	st.nodes, st.checks = seenIn(r.entries)
	if !st.fetched || !endpointsEqual(st.eps, eps) {
		l.changed[st.cluster] = true
		if st.fetched {
			st.changedAt = time.Now()
			if sw := l.sweep; sw != nil && r.watch == nil {
				sw.found++
			}
		}
	}
	st.eps, st.fetched = eps, true
	return true
}

// sweptOne records that a read of st dispatched as seq answered or failed
// (a failed read is retried on its own; the sweep does not wait for it).
func (l *loop) sweptOne(st *svcState, seq uint64) {
	if sw := l.sweep; sw != nil && seq >= sw.seq {
		l.leaveSweep(st)
	}
}
