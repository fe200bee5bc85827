package replicas

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsbridge/xdsbridge/bench/consul"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// roamFleet is a fleet of delta ADS clients (wildcard CDS, then EDS for
// every cluster, as Envoy) that, like Envoy, open a new stream when theirs
// ends, each over a new connection to the same address (the balancer), so
// a client whose replica dies lands on another. A reconnect lists what
// the client holds in initial_resource_versions. Every resource received
// is recorded in the ledger.
type roamFleet struct {
	addr string
	// dial opens a client's connection to addr and tells which replica
	// it reached (-1: unknown, as through a proxy).
	dial     func(ctx context.Context, addr string) (net.Conn, int, error)
	services int
	l        *ledger
	members  []*roamer
	wg       sync.WaitGroup
}

// roamer is one client of a roamFleet.
type roamer struct {
	f     *roamFleet
	i     int
	later atomic.Bool  // on a stream after a reconnect
	port  atomic.Int32 // local port of its current connection
	// backend is the replica its current connection reached (-1:
	// unknown).
	backend atomic.Int32
	gen     atomic.Int32 // streams opened so far
	bad     atomic.Int64 // assignments the ledger could not read
	// removed counts the names the client was told are gone
	// (removed_resources); short the assignments it received with fewer
	// endpoints than the registry ever lists. The registry never removes a
	// service or an instance here, so either is an endpoint gone missing.
	removed, short atomic.Int64

	mu    sync.Mutex
	c     *envoysim.Client
	busy  bool // reconnecting
	moves []move
}

// move is one reconnect: when the client saw its stream end (lost), when
// it began to open the next one (opened), when that one was open (up) and
// when it brought its first response (first). Zero times: not yet. A
// replica sends nothing to a reconnect that holds every version it has,
// so the first response may be the next change's.
type move struct{ lost, opened, up, first time.Time }

// envoyRetryBase is the base interval of Envoy's retries of an xDS
// stream: its first retry waits a random time below it.
const envoyRetryBase = 500 * time.Millisecond

// startRoamFleet starts the clients, at most 64 opening at once, and the
// supervisor that reconnects them, which runs until ctx ends.
func startRoamFleet(ctx context.Context, addr string, dial func(context.Context, string) (net.Conn, int, error), clients, services int, l *ledger) (*roamFleet, error) {
	f := &roamFleet{addr: addr, dial: dial, services: services, l: l, members: make([]*roamer, clients)}
	for i := range f.members {
		f.members[i] = &roamer{f: f, i: i}
	}
	slots := make(chan struct{}, 64)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i, m := range f.members {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			c, err := envoysim.Start(ctx, m.options(nil, nil))
			errs[i] = err
			m.mu.Lock()
			m.c = c
			m.mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.close()
		return nil, fmt.Errorf("starting the fleet: %w", err)
	}
	f.wg.Go(func() { f.supervise(ctx) })
	return f, nil
}

// options are the client's envoysim options for its next stream, holding
// vs (hashes hs) from the last one.
func (m *roamer) options(vs map[string]map[string]string, hs map[string]map[string]uint64) envoysim.Options {
	gen := m.gen.Add(1)
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, b, err := m.f.dial(ctx, addr)
		if err == nil && m.gen.Load() == gen {
			m.port.Store(int32(localPort(c)))
			m.backend.Store(int32(b))
		}
		return c, err
	}
	return envoysim.Options{
		Addr: m.f.addr, Node: fmt.Sprintf("envoy-%05d", m.i), Delta: true, Light: true,
		InitialVersions: vs, InitialHashes: hs,
		Reject:     m.observe,
		OnResponse: m.onResponse,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial),
			grpc.WithDefaultCallOptions(grpc.WaitForReady(true))},
	}
}

// observe records a response's resources in the ledger before the client
// applies them (envoysim's Reject hook; it never rejects).
func (m *roamer) observe(typeURL string, rs []*anypb.Any) error {
	now, later := time.Now(), m.later.Load()
	for _, a := range rs {
		switch typeURL {
		case envoysim.ClusterType:
			m.f.l.cluster(m.i, later)
		case envoysim.EndpointType:
			svc, k, n, err := assignmentMarker(a.GetValue(), m.f.services)
			if err != nil {
				m.bad.Add(1)
				continue
			}
			if n < consul.Instances {
				m.short.Add(1)
			}
			m.f.l.assignment(m.i, svc, k, later, now)
		}
	}
	return nil
}

func (m *roamer) onResponse(_ *envoysim.Client, rcv envoysim.Received) {
	m.removed.Add(int64(len(rcv.Removed)))
	m.mu.Lock()
	if n := len(m.moves); n > 0 && m.moves[n-1].first.IsZero() {
		m.moves[n-1].first = time.Now()
	}
	m.mu.Unlock()
}

// assignmentMarker reads a serialized ClusterLoadAssignment: its service
// (from the name svc-NNNNN), the change its marker port shows (0: none)
// and how many endpoints it lists.
func assignmentMarker(b []byte, services int) (svc int, k int32, endpoints int, err error) {
	var cla endpointv3.ClusterLoadAssignment
	if err := proto.Unmarshal(b, &cla); err != nil {
		return 0, 0, 0, fmt.Errorf("decoding assignment: %w", err)
	}
	num, ok := strings.CutPrefix(cla.GetClusterName(), "svc-")
	svc, err = strconv.Atoi(num)
	if !ok || err != nil || svc < 0 || svc >= services {
		return 0, 0, 0, fmt.Errorf("assignment %q is not a service of the scenario", cla.GetClusterName())
	}
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			endpoints++
			if p := int32(e.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()); p > markerBase {
				k = p - markerBase
			}
		}
	}
	return svc, k, endpoints, nil
}

func (m *roamer) client() *envoysim.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c
}

// supervise checks every 50 ms for clients whose stream ended and
// reconnects each in a goroutine of its own.
func (f *roamFleet) supervise(ctx context.Context) {
	every(ctx, 50*time.Millisecond, func() {
		for _, m := range f.members {
			m.mu.Lock()
			lost := !m.busy && m.c != nil && m.c.Err() != nil
			if lost {
				m.busy = true
				m.moves = append(m.moves, move{lost: time.Now()})
			}
			m.mu.Unlock()
			if lost {
				f.wg.Go(func() { m.reconnect(ctx) })
			}
		}
	})
}

// reconnect replaces a client whose stream ended with a new one that
// holds what it held, after Envoy's first retry delay.
func (m *roamer) reconnect(ctx context.Context) {
	wait := time.NewTimer(rand.N(envoyRetryBase))
	defer wait.Stop()
	select {
	case <-ctx.Done():
		return
	case <-wait.C:
	}
	old := m.client()
	vs, hs := old.Versions(), old.Hashes()
	old.Close()
	m.later.Store(true)
	for ctx.Err() == nil {
		m.mu.Lock()
		m.moves[len(m.moves)-1].opened = time.Now()
		m.mu.Unlock()
		c, err := envoysim.Start(ctx, m.options(vs, hs))
		if err == nil {
			m.mu.Lock()
			m.c, m.busy = c, false
			m.moves[len(m.moves)-1].up = time.Now()
			m.mu.Unlock()
			return
		}
		retry := time.NewTimer(envoyRetryBase)
		select {
		case <-ctx.Done():
		case <-retry.C:
		}
		retry.Stop()
	}
}

// served counts the clients that hold every cluster and assignment.
func (f *roamFleet) served() int {
	n := 0
	for _, m := range f.members {
		if c := m.client(); c != nil && c.Len(envoysim.ClusterType) == f.services && c.Len(envoysim.EndpointType) == f.services {
			n++
		}
	}
	return n
}

// movesOf returns a copy of a client's reconnects.
func (m *roamer) movesOf() []move {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]move(nil), m.moves...)
}

// close ends every client; the supervisor ends with the caller's ctx,
// which must be done first.
func (f *roamFleet) close() {
	f.wg.Wait()
	var wg sync.WaitGroup
	for _, m := range f.members {
		if c := m.client(); c != nil {
			wg.Go(c.Close)
		}
	}
	wg.Wait()
}
