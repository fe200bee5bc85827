package sources_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

// TestStatusFailuresCountTheCurrentPeriod checks that /sources' failures
// counts the failed reads of the current failing period only (a recovered
// source shows 0) while failures_total keeps every one.
func TestStatusFailuresCountTheCurrentPeriod(t *testing.T) {
	st := sources.NewStatus("static")
	counts := func() (failures, total uint64) {
		t.Helper()
		b, err := json.Marshal(st.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Failures uint64 `json:"failures"`
			Total    uint64 `json:"failures_total"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		return got.Failures, got.Total
	}
	steps := []struct {
		name          string
		do            func()
		failures, all uint64
	}{
		{"three failed polls", func() {
			for range 3 {
				st.Failed(errors.New("parsing services.yaml: line 3"))
			}
		}, 3, 3},
		{"healthy again", st.Succeeded, 0, 3},
		{"failing again", func() { st.Failed(errors.New("reading services.yaml: no such file")) }, 1, 4},
	}
	for _, s := range steps {
		s.do()
		if f, all := counts(); f != s.failures || all != s.all {
			t.Errorf("after %s: failures %d, failures_total %d; want %d, %d", s.name, f, all, s.failures, s.all)
		}
	}
}
