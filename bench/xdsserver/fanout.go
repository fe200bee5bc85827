package xdsserver

import (
	"runtime"
	"slices"
	"sync"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// floorStream is one stream of the floor: all it keeps of a client.
type floorStream struct {
	delta bool
	// mu serializes sends: the stream's handler sends initial states, the
	// fan-out the changes, and gRPC allows one SendMsg at a time.
	mu     sync.Mutex
	send   func(any) error
	closed bool // the handler returned or a send failed; guarded by mu
}

// write sends b (its protocol's encoding of a change) unless the stream
// is closed; a failed send closes it, as the client is gone.
func (s *floorStream) write(delta, sotw rawResponse) {
	b := sotw
	if s.delta {
		b = delta
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && s.send(b) != nil {
		s.closed = true
	}
}

// fanOut writes a change to every stream, spread over one goroutine per
// CPU so that the floor is not held to one CPU where the engine uses all.
func fanOut(streams []*floorStream, delta, sotw rawResponse) {
	if len(streams) == 0 {
		return
	}
	n := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for part := range slices.Chunk(streams, (len(streams)+n-1)/n) {
		wg.Go(func() {
			for _, s := range part {
				s.write(delta, sotw)
			}
		})
	}
	wg.Wait()
}

// DeltaAggregatedResources answers the first subscription of each type.
func (f *floor) DeltaAggregatedResources(st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	return f.serve(&floorStream{delta: true, send: st.SendMsg}, func() (string, bool, error) {
		req, err := st.Recv()
		return req.GetTypeUrl(), len(req.GetResourceNamesSubscribe()) > 0, err
	})
}

// StreamAggregatedResources answers the first request of each type that
// subscribes to something: CDS's wildcard, EDS's names.
func (f *floor) StreamAggregatedResources(st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	return f.serve(&floorStream{send: st.SendMsg}, func() (string, bool, error) {
		req, err := st.Recv()
		typ := req.GetTypeUrl()
		return typ, typ != resourcev3.EndpointType || len(req.GetResourceNames()) > 0, err
	})
}

// serve reads requests until the client leaves: recv returns a request's
// type and whether it subscribes to something. The first subscribing
// request of a type gets the type's initial state; every other request (an
// ACK, a NACK, a change of names) is ignored.
func (f *floor) serve(s *floorStream, recv func() (string, bool, error)) error {
	defer f.leave(s)
	sent := map[string]bool{}
	for {
		typ, subscribes, err := recv()
		if err != nil {
			return nil // the client left
		}
		if sent[typ] || !subscribes {
			continue
		}
		sent[typ] = true
		if err := f.join(s, typ); err != nil {
			return err
		}
	}
}

// join sends s the current state of typ and, for assignments, adds it to
// the streams every later change goes to. The stream's send lock is held
// across both, so a change published meanwhile reaches it after the state
// it changes, and a change published before is in that state.
func (f *floor) join(s *floorStream, typ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.mu.Lock()
	b, err := f.initialLocked(typ, s.delta)
	if err == nil && b != nil && typ == resourcev3.EndpointType {
		f.subs[s] = struct{}{}
	}
	f.mu.Unlock()
	if err != nil || b == nil {
		return err
	}
	if err := s.send(b); err != nil {
		s.closed = true
		return err
	}
	return nil
}

// leave closes s, so that no change is sent on it once its handler has
// returned, and forgets it.
func (f *floor) leave(s *floorStream) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	f.mu.Lock()
	delete(f.subs, s)
	f.mu.Unlock()
}
