package xds

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// writerClient is an in-process delta client of s subscribed to every
// assignment, whose writer hands each response to send.
func writerClient(t *testing.T, s *Server, send func(*outbound) error) (*client, *writer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, r := s.connect(ctx, "test", true)
	if r != nil {
		t.Fatal(r.err)
	}
	w := c.startWriter(ctx, cancel, send)
	t.Cleanup(func() { cancel(); _ = w.stop(); s.disconnect(c) })
	c.onDelta("", &discoveryv3.DeltaDiscoveryRequest{Node: envoyNode, TypeUrl: EndpointType, ResourceNamesSubscribe: []string{"*"}}, nil)
	return c, w
}

// waitIdle waits until no run of w is under way.
func (w *writer) waitIdle() {
	w.mu.Lock()
	for w.running {
		w.idle.Wait()
	}
	w.mu.Unlock()
}

// An idle stream holds no writer goroutine: served clients that are owed
// nothing add no goroutines, however many there are.
func TestWriterIdleHoldsNoGoroutine(t *testing.T) {
	s := NewServer(Options{})
	s.Apply([]Resource{assignment(svcName(0)), assignment(svcName(1))}, nil)
	const clients = 100
	before := runtime.NumGoroutine()
	sent := make(chan struct{}, clients)
	ws := make([]*writer, clients)
	for i := range clients {
		_, ws[i] = writerClient(t, s, func(*outbound) error { sent <- struct{}{}; return nil })
	}
	for range clients {
		<-sent
	}
	for _, w := range ws {
		w.waitIdle()
	}
	// A goroutine that has marked its run over may not have returned yet;
	// the margin is far below one per client.
	if got := runtime.NumGoroutine() - before; got > clients/10 {
		t.Fatalf("%d idle served clients hold %d more goroutines", clients, got)
	}
}

// No poke is lost: a change that lands after a run's last look and before
// it exits makes the run look again, so once the writer is idle its client
// is owed nothing.
func TestWriterLosesNoPoke(t *testing.T) {
	s := NewServer(Options{})
	s.Apply([]Resource{assignment(svcName(0))}, nil)
	sent := make(chan *outbound, 4)
	c, w := writerClient(t, s, func(o *outbound) error { sent <- o; return nil })
	<-sent
	w.waitIdle()
	w.afterDrain = func() { // the writer is not running: no race on the field
		w.afterDrain = nil
		s.Apply([]Resource{assignment(svcName(0)), assignment(svcName(1))}, nil)
	}
	w.poke()
	w.waitIdle()
	if o := owed(c); o != nil {
		t.Fatalf("writer idle while %d resources are owed", o.resources)
	}
	if o := <-sent; o.resources != 1 {
		t.Fatalf("the change's response carries %d resources, want 1", o.resources)
	}
}

// stop returns only once a send under way has returned: the stream's
// SendMsg is never called after its handler returns.
func TestWriterStopWaitsForSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewServer(Options{})
		s.Apply([]Resource{assignment(svcName(0))}, nil)
		entered, release := make(chan struct{}), make(chan struct{})
		_, w := writerClient(t, s, func(*outbound) error {
			close(entered)
			<-release
			return nil
		})
		<-entered
		stopped := make(chan struct{})
		go func() { _ = w.stop(); close(stopped) }()
		synctest.Wait() // stop is waiting, or has returned
		select {
		case <-stopped:
			t.Fatal("stop returned while a send was under way")
		default:
		}
		close(release)
		<-stopped
		w.poke() // after stop: starts nothing
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if running {
			t.Fatal("a poke after stop started a run")
		}
	})
}
