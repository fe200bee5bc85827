package manager

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

// testMerger returns a merger of sources with these names, each with a
// status view, merging every service by MergeFirst.
func testMerger(names ...string) *merger {
	named := make([]Named, len(names))
	for i, n := range names {
		named[i] = Named{Name: n, view: &statusView{}}
	}
	return newMerger(named, MergeConfig{}, slog.New(slog.DiscardHandler))
}

func manyTestServices(n int) []sources.Service {
	ss := make([]sources.Service, n)
	for i := range ss {
		ss[i] = testSvc(fmt.Sprintf("svc-%05d", i), "10.0.0.1", "10.0.0.2")
	}
	return ss
}

// TestMergerCostFollowsChange checks that after a large sync, a one-service
// change leaves one dirty name and publishes one service.
func TestMergerCostFollowsChange(t *testing.T) {
	tests := []struct {
		name string
		up   sources.Update
		want string
	}{
		{"partial upsert", upsertUp(testSvc("svc-00042", "10.0.0.3")), "+svc-00042[10.0.0.3:80]"},
		{"partial removal", removeUp("svc-00042"), "-svc-00042"},
		{"full with one change", func() sources.Update {
			ss := manyTestServices(10000)
			ss[42] = testSvc("svc-00042")
			return fullUp(ss...)
		}(), "+svc-00042[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := testMerger("a", "b")
			m.apply(0, fullUp(manyTestServices(10000)...))
			m.apply(1, fullUp())
			if c := m.flush(); len(c.Upserted) != 10000 {
				t.Fatalf("first flush upserted %d services, want 10000", len(c.Upserted))
			}
			if !m.apply(0, tt.up) {
				t.Fatal("apply reported no change")
			}
			if len(m.dirty) != 1 {
				t.Errorf("%d dirty names after a one-service change, want 1", len(m.dirty))
			}
			if got := changesString(m.flush()); got != tt.want {
				t.Errorf("flush = %q, want %q", got, tt.want)
			}
		})
	}
}

// BenchmarkMergerOneChange measures a one-service partial update and its
// flush; the cost should not grow with the number of services.
func BenchmarkMergerOneChange(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			m := testMerger("a", "b")
			m.apply(0, fullUp(manyTestServices(n)...))
			m.apply(1, fullUp())
			m.flush()
			addrs := []string{"10.0.0.3", "10.0.0.4"}
			for i := 0; b.Loop(); i++ {
				m.apply(0, upsertUp(testSvc("svc-00042", addrs[i%2])))
				if c := m.flush(); len(c.Upserted) != 1 {
					b.Fatalf("flush upserted %d", len(c.Upserted))
				}
			}
		})
	}
}

// BenchmarkMergerFullOneChange measures a Full update of 10,000 services
// of which one changed: the update itself is O(N) comparisons, but only
// the changed service reaches the flush.
func BenchmarkMergerFullOneChange(b *testing.B) {
	m := testMerger("a")
	m.apply(0, fullUp(manyTestServices(10000)...))
	m.flush()
	addrs := []string{"10.0.0.3", "10.0.0.4"}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		ss := manyTestServices(10000)
		ss[42] = testSvc("svc-00042", addrs[i%2])
		b.StartTimer()
		m.apply(0, fullUp(ss...))
		if c := m.flush(); len(c.Upserted) != 1 {
			b.Fatalf("flush upserted %d", len(c.Upserted))
		}
	}
}
