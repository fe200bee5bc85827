package replicas

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/xdsbridge/xdsbridge/bench/fleet"
	"github.com/xdsbridge/xdsbridge/bench/proc"
	"github.com/xdsbridge/xdsbridge/bench/report"
	"github.com/xdsbridge/xdsbridge/bench/workload"
	"github.com/xdsbridge/xdsbridge/test/envoysim"
)

// budget is the change latency target: a change whose first second
// overlaps the reconnect window counts in the window.
const budget = time.Second

// failover churns with every replica up, kills replica 0 (SIGKILL),
// waits until every client it had is current elsewhere, restarts it,
// follows the spread, then stops the churn and checks every client's
// state.
func (r *replicaRun) failover(ctx context.Context) error {
	cfg := r.cfg
	idle, err := r.idleReads(ctx)
	if err != nil {
		return err
	}
	r.l.track()
	tracked := time.Now()
	r.beginPhase()
	stopChurn := r.churning(ctx)
	defer stopChurn()
	if r.res.Reads[1], err = r.countReads(ctx, idle, cfg.Warmup); err != nil {
		return err
	}
	r.endPhase("warm-up, every replica up")

	var moved []*roamer
	on := make([]int, len(r.fleet.members))
	for i, m := range r.fleet.members {
		if on[i] = r.rt.backendOf(m); on[i] == 0 {
			moved = append(moved, m)
		}
	}
	r.res.Moved = len(moved)
	kill := time.Now()
	lag := r.l.replicaLag(on, len(r.bridges), tracked, kill.Add(-budget))
	r.res.Lag = [3]time.Duration{report.Pct(lag, 50), report.Pct(lag, 99), report.Pct(lag, 100)}
	victim := r.bridges[0]
	_ = victim.cmd.Process.Kill()
	_ = victim.cmd.Wait()
	victim.cmd = nil
	r.log.Info("killed", "replica", victim.name, "clients", len(moved))
	var end time.Time
	werr := proc.Poll(ctx, cfg.Timeout, func() bool {
		var ok bool
		end, ok = r.caughtUp(moved, kill)
		return ok
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.res.WindowOK = werr == nil
	if !r.res.WindowOK {
		end = time.Now()
	}
	r.res.Window = end.Sub(kill)
	r.log.Info("moved clients current", "window", r.res.Window.Round(time.Millisecond), "ok", r.res.WindowOK)
	if err := sleep(ctx, cfg.After); err != nil {
		return err
	}
	r.endPhase("failover: kill, window, then " + cfg.After.String())

	restart := time.Now()
	if err := r.startReplica(ctx, 0); err != nil {
		return err
	}
	if err := sleep(ctx, cfg.Spread-time.Since(restart)); err != nil {
		return err
	}
	r.endPhase("after the restart")
	stopChurn()
	stopped := time.Now()
	r.log.Info("churn stopped", "changes", r.l.made.Load())

	// Every change made must reach every client; wait for the last ones.
	_ = proc.Poll(ctx, cfg.Timeout, func() bool { _, _, miss := r.l.latencies(tracked, stopped); return miss == 0 })
	r.res.Phases = []phaseLatency{
		r.phase("warm-up (every replica up)", tracked, kill.Add(-budget)),
		r.phase("reconnect window (from 1 s before the kill)", kill.Add(-budget), end.Add(time.Nanosecond)),
		r.phase("after the window, replica down", end.Add(time.Nanosecond), restart),
		r.phase("after the restart", restart, stopped),
	}
	r.res.Spread = r.rt.book.spread(restart)
	r.sumReceipts(moved)
	return r.validate(ctx)
}

// caughtUp reports when the last moved client was current: it had a new
// stream open after kill and had received every change made before it
// began to open it (later ones are ordinary pushes, timed as such).
func (r *replicaRun) caughtUp(moved []*roamer, kill time.Time) (time.Time, bool) {
	end, lacked := kill, 0
	var first time.Duration
	var waits, opens, catchUps, back, current []time.Duration
	for _, m := range moved {
		i := slices.IndexFunc(m.movesOf(), func(mv move) bool { return !mv.lost.Before(kill) })
		if i < 0 {
			return end, false
		}
		mv := m.movesOf()[i]
		if mv.up.IsZero() {
			return end, false
		}
		at, n, ok := r.l.current(m.i, mv.lost, mv.opened)
		if !ok {
			return end, false
		}
		end, lacked = latest(end, latest(at, mv.up)), lacked+n
		waits, opens = append(waits, mv.opened.Sub(mv.lost)), append(opens, mv.up.Sub(mv.opened))
		catchUps = append(catchUps, max(at.Sub(mv.up), 0))
		back, current = append(back, mv.up.Sub(kill)), append(current, latest(at, mv.up).Sub(kill))
		if !mv.first.IsZero() {
			first = max(first, mv.first.Sub(mv.opened))
		}
	}
	r.res.Lacked, r.res.FirstResponse = lacked, first
	q := func(ds []time.Duration) [3]time.Duration {
		return [3]time.Duration{report.Pct(ds, 50), report.Pct(ds, 99), report.Pct(ds, 100)}
	}
	r.res.Steps = [3][3]time.Duration{q(waits), q(opens), q(catchUps)}
	r.res.Reconnected, r.res.Current = q(back), q(current)
	return end, true
}

// phase summarizes the latencies of the changes made in [from, to).
func (r *replicaRun) phase(name string, from, to time.Time) phaseLatency {
	pairs, per, miss := r.l.latencies(from, to)
	return phaseLatency{Name: name, Changes: len(r.l.owed(from, to)), Pairs: len(pairs), Missing: miss,
		P50: report.Pct(pairs, 50), P99: report.Pct(pairs, 99), Max: report.Pct(pairs, 100), ConvP99: report.Pct(per, 99), ConvMax: report.Pct(per, 100)}
}

// sumReceipts adds up the ledger's receipt counts.
func (r *replicaRun) sumReceipts(moved []*roamer) {
	sum := func(c int, s int, into *receiptSums) {
		g := &r.l.got[c]
		into.Clusters += g.clusters[s].Load()
		into.Assignments += g.assignments[s].Load()
		into.Fresh += g.fresh[s].Load()
		into.Again += g.again[s].Load()
		into.Reverts += g.reverts[s].Load()
		into.Reapplied += g.reapplied[s].Load()
	}
	for _, m := range moved {
		sum(m.i, 1, &r.res.MovedGot)
	}
	var gaps []time.Duration
	for _, m := range r.fleet.members {
		sum(m.i, 1, &r.res.LaterGot)
		sum(m.i, 0, &r.res.FirstGot)
		for _, mv := range m.movesOf() {
			r.res.Reconnects++
			if !mv.first.IsZero() {
				gaps = append(gaps, mv.first.Sub(mv.lost))
			}
		}
		r.res.Unreadable += m.bad.Load()
		r.res.Removed += m.removed.Load()
		r.res.Short += m.short.Load()
	}
	r.res.Gap = [3]time.Duration{report.Pct(gaps, 50), report.Pct(gaps, 99), report.Pct(gaps, 100)}
	// The first stream's initial state is one cluster and one fresh
	// assignment per service; only what came beyond it counts.
	n := int64(r.cfg.Services * r.cfg.Clients)
	r.res.FirstGot.Clusters -= n
	r.res.FirstGot.Assignments -= n
	r.res.FirstGot.Fresh -= n
	r.res.Superseded = r.l.superseded()
	r.res.Made = int(r.l.made.Load())
	for k := int32(1); k <= r.l.made.Load(); k++ {
		if r.l.failed[k].Load() {
			r.res.Failed++
		}
	}
}

// validate ends the fleet and checks that every client holds the
// registry's state: an auditor (a full client of a replica that was never
// killed) must hold, for every service, the instances Consul lists, and
// every client the same clusters and assignments as the auditor, byte for
// byte, and the latest change of every service.
func (r *replicaRun) validate(ctx context.Context) error {
	_, _, r.res.Missing = r.l.latencies(time.Time{}, time.Now())
	r.stopFleet()
	r.fleet.close()
	aud, err := envoysim.Start(ctx, envoysim.Options{Addr: r.bridges[len(r.bridges)-1].xds, Node: "auditor", Delta: true})
	if err != nil {
		return err
	}
	defer aud.Close()
	n := r.cfg.Services
	if err := proc.Poll(ctx, r.cfg.Timeout, func() bool {
		return aud.Len(envoysim.ClusterType) == n && aud.Len(envoysim.EndpointType) == n
	}); err != nil {
		return fmt.Errorf("the auditor was not served: %w", err)
	}
	wrong := func(format string, args ...any) {
		r.res.Wrong++
		if r.res.FirstWrong == "" {
			r.res.FirstWrong = fmt.Sprintf(format, args...)
		}
	}
	for i := range n {
		name := workload.Name(i)
		inst, _, err := r.capi.Catalog().Service(name, "", nil)
		if err != nil {
			return fmt.Errorf("reading %s from the catalog: %w", name, err)
		}
		var want []int
		for _, s := range inst {
			want = append(want, s.ServicePort)
		}
		slices.Sort(want)
		cla, _ := aud.Resource(envoysim.EndpointType, name).(*endpointv3.ClusterLoadAssignment)
		if got := fleet.Ports(aud, name); cla == nil || !slices.Equal(got, want) {
			return fmt.Errorf("the auditor holds %s with ports %v, Consul lists %v", name, got, want)
		}
	}
	hashes := aud.Hashes()
	for _, m := range r.fleet.members {
		c := m.client()
		if svc := r.l.holdsLatest(m.i); svc >= 0 {
			wrong("client %d: %s is not at its latest change", m.i, workload.Name(svc))
			continue
		}
		for _, t := range []string{envoysim.ClusterType, envoysim.EndpointType} {
			if c.Len(t) != n {
				wrong("client %d holds %d of %d %s", m.i, c.Len(t), n, t)
				break
			}
			for name, h := range hashes[t] {
				if got, _, ok := c.Hash(t, name); !ok || got != h {
					wrong("client %d: %s %s differs from the auditor's", m.i, t, name)
					break
				}
			}
		}
	}
	r.log.Info("validated", "clients", len(r.fleet.members), "wrong", r.res.Wrong)
	return nil
}

// beginPhase notes every process's CPU at a phase's start.
func (r *replicaRun) beginPhase() {
	r.cpu, r.phaseAt = r.cpuNow(), time.Now()
}

// endPhase records every process's CPU over the phase that ends and its
// RSS at the end, and begins the next.
func (r *replicaRun) endPhase(name string) {
	now := r.cpuNow()
	u := usage{Phase: name, Seconds: time.Since(r.phaseAt).Seconds(), CPU: map[string]time.Duration{}, RSS: map[string]int64{}}
	for k, v := range now {
		// A process that was (re)started in the phase counts from zero;
		// the CPU of one killed in it is lost.
		if v0, ok := r.cpu[k]; ok {
			v -= v0
		}
		u.CPU[k.name] += v
	}
	_, u.RSS["load generator"] = proc.Mem(os.Getpid())
	if r.rt != nil && r.rt.proc != nil {
		_, u.RSS["balancer"] = proc.Mem(r.rt.proc.Process.Pid)
	}
	for _, b := range r.bridges {
		if b.cmd != nil {
			_, u.RSS[b.name] = proc.Mem(b.cmd.Process.Pid)
		}
	}
	r.res.Usage = append(r.res.Usage, u)
	r.beginPhase()
}

// process names a process by its role and pid.
type process struct {
	name string
	pid  int
}

func (r *replicaRun) cpuNow() map[process]time.Duration {
	out := map[process]time.Duration{{name: "load generator"}: proc.SelfCPU()}
	if r.rt != nil && r.rt.proc != nil {
		out[process{"balancer", r.rt.proc.Process.Pid}] = proc.CPU(r.rt.proc.Process.Pid)
	}
	for _, b := range r.bridges {
		if b.cmd != nil {
			out[process{b.name, b.cmd.Process.Pid}] = proc.CPU(b.cmd.Process.Pid)
		}
	}
	return out
}
