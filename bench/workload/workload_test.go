package workload

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestBuildDeterministic(t *testing.T) {
	s := Spec{Services: 50, Endpoints: 10}
	a, err := s.Build(7, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Build(7, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(a.Assignment, b.Assignment) || !proto.Equal(a.Cluster, b.Cluster) {
		t.Error("same service and change built differently")
	}
	if got := a.Assignment.GetClusterName(); got != Name(7) {
		t.Errorf("assignment name = %q", got)
	}
	var n int
	for _, l := range a.Assignment.GetEndpoints() {
		n += len(l.GetLbEndpoints())
	}
	if n != 10 {
		t.Errorf("%d endpoints, want 10", n)
	}
}

func TestChangeIsSingleEndpoint(t *testing.T) {
	s := Spec{Services: 10, Endpoints: 5}
	for _, tc := range []struct {
		name   string
		before int
		after  int
	}{
		{"first change", 0, 4},
		{"later change", 4, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := s.Service(3, tc.before), s.Service(3, tc.after)
			diff := 0
			for i := range a.Endpoints {
				if !a.Endpoints[i].Equal(b.Endpoints[i]) {
					diff++
				}
			}
			if diff != 1 {
				t.Errorf("%d endpoints differ, want 1", diff)
			}
		})
	}
}

func TestTargetsSpread(t *testing.T) {
	s := Spec{Services: 1000, Endpoints: 1}
	seen := map[int]bool{}
	for k := 1; k <= 1000; k++ {
		i := s.Target(k)
		if i < 0 || i >= s.Services {
			t.Fatalf("change %d targets %d", k, i)
		}
		seen[i] = true
	}
	if len(seen) != 1000 {
		t.Errorf("1000 consecutive changes touch %d services, want all 1000 once", len(seen))
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		ok   bool
	}{
		{"fine", Spec{10, 10}, true},
		{"no services", Spec{0, 10}, false},
		{"no endpoints", Spec{10, 0}, false},
		{"too many", Spec{1 << 20, 32}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.spec.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}
