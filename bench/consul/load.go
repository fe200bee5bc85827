package consul

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/test/consultest"
)

// agentSample is what the agents had spent at one moment: CPU time of the
// server and of the agent the bridge reads (the same process in the dev
// topology), and the agent's HTTP GETs by path (consul_api_http_count of
// its telemetry; the harness's own metrics reads left out, its writes are
// PUTs).
type agentSample struct {
	at                  time.Time
	serverCPU, agentCPU time.Duration
	gets                map[string]float64
}

// sampleAgents takes an agentSample of the topology.
func sampleAgents(top *Topology) (agentSample, error) {
	s := agentSample{at: time.Now(), serverCPU: proc.CPU(top.serverPID), agentCPU: proc.CPU(top.agentPID), gets: map[string]float64{}}
	m, err := consultest.Metrics(top.Agent)
	if err != nil {
		return s, err
	}
	const prefix = `consul_api_http_count{method="GET",path="`
	for k, v := range m {
		path, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		path = strings.TrimSuffix(path, `"}`)
		if path != "v1_agent_metrics" {
			s.gets[path] += v
		}
	}
	return s, nil
}

// AgentLoad is what the agents spent over a window.
type AgentLoad struct {
	Seconds float64
	// ServerCPU and AgentCPU are CPU time as a share of one core (0.25 is
	// a quarter of a core); the same process in the dev topology.
	ServerCPU, AgentCPU float64
	// GETs counts the agent's GET requests by path.
	GETs map[string]float64
}

// loadBetween is the load from a to b.
func loadBetween(a, b agentSample) AgentLoad {
	secs := b.at.Sub(a.at).Seconds()
	l := AgentLoad{Seconds: secs, GETs: map[string]float64{},
		ServerCPU: (b.serverCPU - a.serverCPU).Seconds() / secs, AgentCPU: (b.agentCPU - a.agentCPU).Seconds() / secs}
	for p, v := range b.gets {
		if d := v - a.gets[p]; d > 0 {
			l.GETs[p] = d
		}
	}
	return l
}

// TotalGETs sums the GETs over paths.
func (l AgentLoad) TotalGETs() float64 {
	n := 0.0
	for _, v := range l.GETs {
		n += v
	}
	return n
}

// describe renders the GETs by path, most first.
func (l AgentLoad) describe() string {
	paths := slices.SortedFunc(maps.Keys(l.GETs), func(a, b string) int {
		if c := cmp.Compare(l.GETs[b], l.GETs[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, p := range paths {
		parts = append(parts, fmt.Sprintf("%s %.0f", p, l.GETs[p]))
	}
	return strings.Join(parts, ", ")
}
