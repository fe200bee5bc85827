package manager

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
)

// failingStore fails its saves while broken, and counts them.
type failingStore struct {
	mu       sync.Mutex
	broken   bool
	attempts int
	saved    map[string][]sources.Service
}

func (s *failingStore) Load() (map[string][]sources.Service, error) { return nil, nil }

func (s *failingStore) Save(st map[string][]sources.Service) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.broken {
		return errors.New("no space left on device")
	}
	s.saved = st
	return nil
}

func (s *failingStore) get() (int, map[string][]sources.Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts, s.saved
}

// TestSaverPacesAFailingStore: while the store fails, snapshots offered
// at any rate cost one write attempt per backoff step, and the newest
// snapshot is written once the store works again.
func TestSaverPacesAFailingStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &failingStore{broken: true}
		s := &saver{dir: st, pending: make(chan map[string][]sources.Service, 1),
			m: &Manager{log: slog.New(slog.DiscardHandler)}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.run(ctx) }()

		// A snapshot every 100 ms for a minute: 600 offers.
		snap := func(i int) map[string][]sources.Service {
			return map[string][]sources.Service{"a": {{Name: string(rune('a' + i%26))}}}
		}
		for i := range 600 {
			s.offer(snap(i))
			time.Sleep(100 * time.Millisecond)
		}
		// The first attempt at once, then one after each backoff step:
		// 1 s, 2 s, 4 s... (each at least half that) within the minute.
		attempts, _ := st.get()
		limit := 1
		for step, spent := saveRetryMin, time.Duration(0); spent+step/2 <= time.Minute; step = min(2*step, saveRetryMax) {
			spent += step / 2
			limit++
		}
		if attempts < 2 || attempts > limit {
			t.Fatalf("%d save attempts for 600 snapshots in a minute of failures, want 2..%d", attempts, limit)
		}
		if st := s.m.StateDirStatus(); !st.Failing || st.Failures != attempts || st.Error == "" || !st.Saved.IsZero() {
			t.Fatalf("status %+v after %d failed attempts, want failing with each counted", st, attempts)
		}

		st.mu.Lock()
		st.broken = false
		st.mu.Unlock()
		time.Sleep(saveRetryMax)
		synctest.Wait()
		if _, saved := st.get(); saved["a"][0].Name != snap(599)["a"][0].Name {
			t.Fatalf("saved %v after the store healed, want the newest snapshot", saved)
		}
		if st := s.m.StateDirStatus(); st.Failing || st.Saved.IsZero() || st.Error != "" {
			t.Fatalf("status %+v once the store healed, want written and not failing", st)
		}
		cancel()
		<-done
	})
}
