package replicas

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/bench/report"
)

// Markdown renders the result.
func (r *Result) Markdown() string {
	var b strings.Builder
	c := r.Config
	age := "default (30m)"
	if c.MaxConnectionAge > 0 {
		age = c.MaxConnectionAge.String()
	}
	transport := "plain HTTP"
	if c.TLS {
		transport = "HTTPS (HTTP/2)"
	}
	route := "each picking the next ready replica for every new connection, as Envoy balances its xDS cluster"
	if c.Balancer == "proxy" {
		route = "behind a TCP balancer process (round robin over the ready replicas per new connection)"
	}
	fmt.Fprintf(&b, "%d replicas, each on its own Consul client agent over %s; %d services × 3 instances; %d delta clients (wildcard CDS + EDS), %s; "+
		"churn %.0f/s; max_connection_age %s\n\n", c.Replicas, transport, c.Services, c.Clients, route, c.Rate, age)
	fmt.Fprintf(&b, "- load average at the start: %s; at the end: %s\n", r.Load[0], r.Load[1])
	fmt.Fprintf(&b, "- registration %v; fleet served in %v\n", r.Setup.Round(time.Millisecond), r.Served.Round(time.Millisecond))
	for _, rd := range r.Reads {
		if rd.Unread != "" {
			fmt.Fprintf(&b, "- Consul server with %d replica(s): not counted (%s)\n", rd.Replicas, rd.Unread)
			continue
		}
		all, net := rd.perChange()
		fmt.Fprintf(&b, "- Consul server with %d replica(s): consul_rpc_request %.0f, consul_rpc_query %.0f over %d changes in %.1f min (%.1f changes/s): %.2f and %.2f per change; "+
			"with nothing changing %.0f and %.0f over %.1f min; net of that, %.2f RPCs per change\n",
			rd.Replicas, rd.RPC, rd.Query, rd.Changes, rd.Minutes, float64(rd.Changes)/rd.Minutes/60, all, rd.Query/max(float64(rd.Changes), 1),
			rd.IdleRPC, rd.IdleQuery, rd.IdleMinutes, net)
	}
	fmt.Fprintf(&b, "- replicas apart (per warm-up change, the first delivery by the last replica less that by the first): p50 %s, p99 %s, max %s\n",
		report.MS(r.Lag[0]), report.MS(r.Lag[1]), report.MS(r.Lag[2]))
	window := r.Window.Round(time.Millisecond).String()
	if !r.WindowOK {
		window = "not reached within " + c.Timeout.String()
	}
	fmt.Fprintf(&b, "- killed replica-0 (SIGKILL) with %d clients; every one current again after %s; they lacked %d changes "+
		"(slowest first response on a new stream %v: a replica sends nothing to a client that holds all it has, so this may be the next change's push)\n",
		r.Moved, window, r.Lacked, r.FirstResponse.Round(time.Millisecond))
	fmt.Fprintf(&b, "  - kill → stream open on another replica: p50 %s, p99 %s, max %s; kill → current: p50 %s, p99 %s, max %s\n",
		report.MS(r.Reconnected[0]), report.MS(r.Reconnected[1]), report.MS(r.Reconnected[2]), report.MS(r.Current[0]), report.MS(r.Current[1]), report.MS(r.Current[2]))
	for i, step := range []string{"stream seen ended → reconnect begun (retry wait)", "→ new stream open", "→ current"} {
		fmt.Fprintf(&b, "  - %s: p50 %s, p99 %s, max %s\n", step, report.MS(r.Steps[i][0]), report.MS(r.Steps[i][1]), report.MS(r.Steps[i][2]))
	}
	g := r.MovedGot
	fmt.Fprintf(&b, "- moved clients' new streams, to the end: %d clusters, %d assignments (%d fresh, %d identical to the one held, %d reverts, %d re-applied); resent beyond what changed: %d\n",
		g.Clusters, g.Assignments, g.Fresh, g.Again, g.Reverts, g.Reapplied, g.Resent())
	g = r.LaterGot
	fmt.Fprintf(&b, "- every stream after a reconnect (%d reconnects; from a stream's end to the next one's first response p50 %s, p99 %s, max %s): "+
		"%d clusters, %d assignments (%d fresh, %d identical, %d reverts, %d re-applied); resent: %d\n",
		r.Reconnects, report.MS(r.Gap[0]), report.MS(r.Gap[1]), report.MS(r.Gap[2]), g.Clusters, g.Assignments, g.Fresh, g.Again, g.Reverts, g.Reapplied, g.Resent())
	g = r.FirstGot
	fmt.Fprintf(&b, "- first streams beyond their initial state: %d clusters, %d assignments (%d fresh, %d identical, %d reverts)\n",
		g.Clusters, g.Assignments, g.Fresh, g.Again, g.Reverts)
	fmt.Fprintf(&b, "- changes made %d (refused by Consul %d); client·change pairs missing %d, superseded %d; unreadable assignments %d\n",
		r.Made, r.Failed, r.Missing, r.Superseded, r.Unreadable)
	fmt.Fprintf(&b, "- endpoints gone missing (any client, any stream): %d names removed, %d assignments short of an instance; versions gone backwards (reverts): %d\n",
		r.Removed, r.Short, r.FirstGot.Reverts+r.LaterGot.Reverts)
	fmt.Fprintf(&b, "- final state: %d of %d clients differ from the registry", r.Wrong, c.Clients)
	if r.FirstWrong != "" {
		fmt.Fprintf(&b, " (first: %s)", r.FirstWrong)
	}
	b.WriteString("\n\n| changes made | n | client·change pairs | p50 | p99 | max | per change p99 | per change max | missing |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %d |\n", p.Name, p.Changes, p.Pairs,
			report.MS(p.P50), report.MS(p.P99), report.MS(p.Max), report.MS(p.ConvP99), report.MS(p.ConvMax), p.Missing)
	}
	b.WriteString("\n| phase | s |")
	names := append([]string{"load generator", "balancer"}, r.replicaNames()...)
	for _, n := range names {
		fmt.Fprintf(&b, " %s CPU %% | %s RSS MB |", n, n)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|---|", len(names)) + "\n")
	for _, u := range r.Usage {
		fmt.Fprintf(&b, "| %s | %.0f |", u.Phase, u.Seconds)
		for _, n := range names {
			rss := "–"
			if v, ok := u.RSS[n]; ok {
				rss = fmt.Sprintf("%.0f", float64(v)/(1<<20))
			}
			fmt.Fprintf(&b, " %.0f | %s |", 100*u.CPU[n].Seconds()/u.Seconds, rss)
		}
		b.WriteString("\n")
	}
	names = r.replicaNames()
	b.WriteString("\nclients per replica (balancer connections), seconds from the restart of replica-0:\n\n| s |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(names)) + "\n")
	for _, s := range r.spreadRows(15 * time.Second) {
		fmt.Fprintf(&b, "| %.0f |", s.At.Seconds())
		for _, n := range s.Clients {
			fmt.Fprintf(&b, " %d |", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (r *Result) replicaNames() []string {
	var out []string
	for i := range r.Config.Replicas {
		out = append(out, fmt.Sprintf("replica-%d", i))
	}
	return out
}

// spreadRows picks a sample every step from just before the kill on.
func (r *Result) spreadRows(step time.Duration) []spreadSample {
	var out []spreadSample
	next := time.Duration(-1 << 62)
	for _, s := range r.Spread {
		if s.At >= next {
			out = append(out, s)
			next = s.At.Truncate(step) + step
		}
	}
	return out
}

// SpreadCSV writes every spread sample: seconds from the restart, then
// the clients of each replica.
func (r *Result) SpreadCSV(w io.Writer) error {
	header := append([]string{"seconds_from_restart"}, r.replicaNames()...)
	if _, err := fmt.Fprintln(w, strings.Join(header, ",")); err != nil {
		return err
	}
	for _, s := range r.Spread {
		row := []string{fmt.Sprintf("%.1f", s.At.Seconds())}
		for _, n := range s.Clients {
			row = append(row, fmt.Sprint(n))
		}
		if _, err := fmt.Fprintln(w, strings.Join(row, ",")); err != nil {
			return err
		}
	}
	return nil
}

// Targets lists the scenario's targets with the figures and whether each
// was met.
func (r *Result) Targets() string {
	var b strings.Builder
	met := func(ok bool) string { return map[bool]string{true: "met", false: "NOT met"}[ok] }
	b.WriteString("| target | measured | |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| resent to moved clients beyond what changed: 0 | %d | %s |\n", r.MovedGot.Resent(), met(r.MovedGot.Resent() == 0))
	fmt.Fprintf(&b, "| changes missed: 0 (every client ends at the registry's state) | %d pairs missing, %d clients wrong | %s |\n",
		r.Missing, r.Wrong, met(r.Missing == 0 && r.Wrong == 0))
	back := r.FirstGot.Reverts + r.LaterGot.Reverts
	fmt.Fprintf(&b, "| no endpoint ever missing, no version ever backwards | %d removed, %d short assignments, %d reverts | %s |\n",
		r.Removed, r.Short, back, met(r.Removed == 0 && r.Short == 0 && back == 0))
	worst := time.Duration(0)
	for _, p := range r.Phases {
		if !strings.HasPrefix(p.Name, "reconnect window") {
			worst = max(worst, p.P99)
		}
	}
	fmt.Fprintf(&b, "| p99 change latency outside the window ≤ 1 s | %s | %s |\n", report.MS(worst), met(worst <= time.Second))
	i := slices.IndexFunc(r.Phases, func(p phaseLatency) bool { return strings.HasPrefix(p.Name, "reconnect window") })
	if i >= 0 {
		fmt.Fprintf(&b, "| (in the window) | p99 %s, max %s | |\n", report.MS(r.Phases[i].P99), report.MS(r.Phases[i].Max))
	}
	fmt.Fprintf(&b, "| time until every moved client is current | %v | |\n", r.Window.Round(time.Millisecond))
	if r.Reads[0].Unread != "" || r.Reads[1].Unread != "" {
		b.WriteString("| server RPCs per change, 3 replicas ≤ 3× 1 | not counted (the server's metrics did not answer) | |\n")
		return b.String()
	}
	one, oneNet := r.Reads[0].perChange()
	all, allNet := r.Reads[1].perChange()
	fmt.Fprintf(&b, "| server RPCs per change, %d replicas ≤ 3× 1 | %.2f against %.2f (%s); net of the idle rate %.2f against %.2f (%s) | %s |\n",
		r.Reads[1].Replicas, all, one, report.Ratio(all, one), allNet, oneNet, report.Ratio(allNet, oneNet), met(all <= 3*one))
	return b.String()
}
