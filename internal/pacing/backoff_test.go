package pacing

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	ceilings := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, c := range ceilings {
		c *= time.Millisecond
		if d := b.Next(); d < c/2 || d > c {
			t.Fatalf("attempt %d: wait %v, want within [%v, %v]", i, d, c/2, c)
		}
	}
	b.Reset()
	if d := b.Next(); d > 100*time.Millisecond {
		t.Fatalf("after Reset: wait %v, want at most Min", d)
	}
}
