package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// fleet is the clients, with what the current change's tracking needs.
type fleet struct {
	clients []*envoysim.Client
	// bytes counts the bytes of the responses received, by type URL.
	bytes map[string]*atomic.Int64
	// cur is the change being timed, nil between changes.
	cur atomic.Pointer[change]
}

// change is one change in flight: it is held by a client once the client
// holds resource name of typeURL with a hash other than old.
type change struct {
	typeURL, name string
	old           uint64
	t0            time.Time
	at            []atomic.Int64 // per client: latency in ns (0 = not yet)
	n             atomic.Int64
	done          chan struct{}
}

var types = []string{envoysim.ClusterType, envoysim.EndpointType, envoysim.ListenerType, envoysim.RouteType, envoysim.SecretType}

// startFleet connects n clients to addr, all at once; edge makes them
// edge Envoys (Options.Listeners) of the node cluster the secret is
// granted to.
func startFleet(ctx context.Context, addr string, n int, delta, edge bool) (*fleet, error) {
	f := &fleet{clients: make([]*envoysim.Client, n), bytes: map[string]*atomic.Int64{}}
	for _, t := range types {
		f.bytes[t] = new(atomic.Int64)
	}
	intern := envoysim.NewInterner()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := envoysim.Start(ctx, envoysim.Options{
				Addr: addr, Node: fmt.Sprintf("edge-%05d", i), Cluster: nodeCluster, Delta: delta,
				Listeners: edge, Light: true, Intern: intern,
				OnResponse: func(c *envoysim.Client, r envoysim.Received) { f.received(i, c, r) },
				// A dial that fails on a busy machine is retried, as an
				// Envoy retries.
				DialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.WaitForReady(true))},
			})
			f.clients[i], errs[i] = c, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.close()
		return nil, fmt.Errorf("starting the fleet: %w", err)
	}
	return f, nil
}

func (f *fleet) close() {
	var wg sync.WaitGroup
	for _, c := range f.clients {
		if c != nil {
			wg.Go(c.Close)
		}
	}
	wg.Wait()
}

func (f *fleet) received(i int, c *envoysim.Client, r envoysim.Received) {
	if b := f.bytes[r.TypeURL]; b != nil {
		b.Add(int64(r.Bytes))
	}
	ch := f.cur.Load()
	if ch == nil || r.TypeURL != ch.typeURL || ch.at[i].Load() != 0 {
		return
	}
	if h, _, ok := c.Hash(ch.typeURL, ch.name); !ok || h == ch.old {
		return
	}
	lat := max(r.Time.Sub(ch.t0), 1)
	if ch.at[i].CompareAndSwap(0, int64(lat)) && ch.n.Add(1) == int64(len(ch.at)) {
		close(ch.done)
	}
}

// holds reports whether every client holds services clusters and
// assignments and, with edge, the listener, its route configuration and
// its secret; and the first stream error, if any.
func (f *fleet) holds(services int, edge bool) (bool, error) {
	for _, c := range f.clients {
		if err := c.Err(); err != nil {
			return false, err
		}
		if c.Len(envoysim.ClusterType) != services || c.Len(envoysim.EndpointType) != services {
			return false, nil
		}
		if edge && (c.Len(envoysim.ListenerType) != 1 || c.Len(envoysim.RouteType) != 1 || c.Len(envoysim.SecretType) != 1) {
			return false, nil
		}
	}
	return true, nil
}

// timed makes a change (write) to resource name of typeURL and waits until
// every client holds it; it returns each client's latency.
func (f *fleet) timed(ctx context.Context, typeURL, name string, timeout time.Duration, write func() error) ([]time.Duration, error) {
	old, _, _ := f.clients[0].Hash(typeURL, name)
	for _, c := range f.clients[1:] {
		if h, _, _ := c.Hash(typeURL, name); h != old {
			return nil, fmt.Errorf("the clients hold different %s %s before the change", typeURL, name)
		}
	}
	ch := &change{typeURL: typeURL, name: name, old: old, at: make([]atomic.Int64, len(f.clients)), done: make(chan struct{}), t0: time.Now()}
	f.cur.Store(ch)
	defer f.cur.Store(nil)
	if err := write(); err != nil {
		return nil, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch.done:
	case <-t.C:
		return nil, fmt.Errorf("%d of %d clients got %s within %s", ch.n.Load(), len(f.clients), name, timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := make([]time.Duration, len(ch.at))
	for i := range ch.at {
		out[i] = time.Duration(ch.at[i].Load())
	}
	return out, nil
}

// byteCounts are the bytes received so far, by type URL.
func (f *fleet) byteCounts() map[string]int64 {
	out := map[string]int64{}
	for t, b := range f.bytes {
		out[t] = b.Load()
	}
	return out
}
