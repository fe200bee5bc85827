package consul

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"syscall"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/sources"
)

// The agent monitor. Reads alone cannot tell a hung agent from an idle one
// (an idle source holds only blocking queries, which may rightly stay
// silent for wait), nor notice quickly that a failing agent answers again.
// So one goroutine probes the agent with /v1/status/leader, a tiny answer
// that needs no ACL: every half read_timeout while it answers, so that a
// hang is seen within 1.5 read_timeout, and while it fails with a backoff of
// its own (probeRetryMin doubling to probeRetryMax, jittered), so that an
// agent that comes back is noticed within about a second however long it
// was away, and an agent that is gone costs about one request a second.
//
// While the probe fails, the probe alone asks: the gate is shut, reads are
// not dispatched, and the blocking queries and the watches wait at the
// gate, whatever their own last error looked like (refused, reset,
// timeout, TLS, an HTTP status). A request that fails without an HTTP
// answer kicks the probe: it probes probeRetryMin after its previous probe
// rather than at the end of its healthy wait, and reads the agent's
// identity. A kick shortens that one wait; while the probe fails, its
// backoff sets the pace and kicks change nothing, so no failure can make
// the probe (or anything it gates) ask in a loop.
const (
	probeRetryMin = 200 * time.Millisecond
	probeRetryMax = time.Second
	// probeFailingTimeout bounds a probe while the probe already fails:
	// a probe caught on a connection the agent never answers must not
	// delay noticing that it answers new ones.
	probeFailingTimeout = 500 * time.Millisecond
)

// identifyEvery: every this many rounds the probe also reads
// /v1/agent/self, so that an agent replaced without any request failing
// (a restart quick enough for Go's transport to retry the cut requests on
// the new agent, or another agent behind the address) is noticed within
// identifyEvery rounds, and so is a change of the agent's connection
// limit.
const identifyEvery = 12

// probeResult is the outcome of one probe: err is nil when the agent
// answered with a leader; gone says that err shows the agent's process
// gone (see wentAway); self is what /v1/agent/self said when the probe
// read it, else nil.
type probeResult struct {
	err  error
	gone bool
	self *agentInfo
}

// Log messages of a failing agent (tests look for them).
const (
	msgFailing   = "consul read failed; serving the last good state until it recovers"
	msgRecovered = "consul reads recovered; resynced"
)

// agentMonitor owns what the source knows of the agent itself: whether
// it answers (its phase, from the probe), whether it went away or lost its
// state, its identity, and the failures of the requests made to it, which
// it records in the status and the failure log. A reset or a resume it
// notes is applied by the loop, which drives the other parts (take).
type agentMonitor struct {
	cl     *agentClient
	log    *slog.Logger
	status *sources.Status
	flog   *sources.FailureLog
	// kick asks the probe to look soon.
	kick chan struct{}

	phase agentPhase
	// gone: during the current outage a request showed the agent's
	// process gone (wentAway).
	gone bool
	// nodeID: the agent's node ID, when known.
	nodeID string
	// leaderless: the last answer said X-Consul-KnownLeader: false.
	leaderless bool
	// pollErr: the bulk queries whose last request failed, by
	// datacenter and kind.
	pollErr map[[2]int]bool
	// due and why: a change the loop has yet to apply; forbidden: a
	// request got a 403 since the loop last read the token.
	due       agentChange
	why       string
	forbidden bool
}

func newAgentMonitor(cl *agentClient, log *slog.Logger, status *sources.Status) *agentMonitor {
	return &agentMonitor{cl: cl, log: log, status: status, kick: make(chan struct{}, 1),
		flog:    &sources.FailureLog{Log: log, FailingMsg: msgFailing, RecoveredMsg: msgRecovered},
		pollErr: map[[2]int]bool{}}
}

// agentPhase is what the probe tells of the agent:
//
//	agentUp    the probe answers (or has not failed yet): reads start,
//	           blocking queries and watches ask (the gate is open).
//	agentDown  the probe failed and has not answered since: the probe
//	           alone asks (the gate is shut).
type agentPhase uint8

const (
	agentUp agentPhase = iota
	agentDown
)

// agentChange is what the loop has to apply after the agent's answers.
type agentChange uint8

const (
	agentSame agentChange = iota
	// agentResumed: the agent answers again after an outage, with its
	// state (it hung, lost its leader, or presented a certificate the
	// source did not trust).
	agentResumed
	// agentReset: Consul lost its state (the agent went away and came
	// back, another agent answers, or an index went backwards).
	agentReset
)

// probe runs until ctx ends, sending each probe's outcome to out; kick
// asks for a probe soon (see above). The first good probe after a kick or
// a failed probe, and every identifyEvery-th, also reads /v1/agent/self.
// It touches only the monitor's client and kick channel.
func (m *agentMonitor) probe(ctx context.Context, c *api.Client, dc string, out chan<- probeResult) {
	healthy := m.cl.cfg.ReadTimeout / 2
	bo := sources.Backoff{Min: probeRetryMin, Max: probeRetryMax}
	t := time.NewTimer(healthy)
	defer t.Stop()
	due := time.Now().Add(healthy)
	var last time.Time // when the previous probe ended
	identify, failing, rounds := false, false, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
			identify = true
			if at := last.Add(probeRetryMin); !failing && at.Before(due) {
				due = at
				t.Reset(time.Until(at))
			}
			continue
		case <-t.C:
		}
		if rounds++; rounds%identifyEvery == 0 {
			identify = true
		}
		limit := m.cl.cfg.ReadTimeout
		if failing {
			limit = min(limit, probeFailingTimeout)
		}
		r := probeResult{err: m.probeOnce(ctx, c, dc, limit)}
		switch {
		case r.err != nil:
			identify, r.gone = true, wentAway(r.err)
		case identify:
			a, err := m.cl.self(ctx, c)
			if err == nil {
				r.self = &a
			}
			identify = err != nil && statusCode(err) == 0
		}
		if ctx.Err() != nil || !send(ctx, out, r) {
			return
		}
		last, failing = time.Now(), r.err != nil
		wait := healthy
		if failing {
			wait = bo.Next()
		} else {
			bo.Reset()
		}
		due = last.Add(wait)
		t.Reset(wait)
	}
}

func (m *agentMonitor) probeOnce(parent context.Context, c *api.Client, dc string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	leader, err := c.Status().LeaderWithQueryOptions(m.cl.queryOptions(ctx, dc))
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil:
		return fmt.Errorf("probing the agent: no answer to /v1/status/leader within %v", limit)
	case err != nil:
		return fmt.Errorf("probing the agent: %w", err)
	case leader == "":
		return errors.New("probing the agent: no cluster leader")
	}
	return nil
}

// onProbe moves the agent's phase on a probe's outcome: a failed probe
// shuts the gate; the first good one after an outage is a resume, or a
// reset when the agent went away meanwhile; a new node ID is a reset.
func (m *agentMonitor) onProbe(r probeResult) {
	if r.err != nil {
		m.gone = m.gone || r.gone
		if m.phase == agentUp {
			m.phase = agentDown
			m.cl.gate.shut()
		}
		m.fail(r.err)
		return
	}
	if m.phase == agentDown {
		m.phase = agentUp
		if m.gone {
			m.noteReset("the agent answers again after it went away")
		} else if m.due == agentSame {
			m.due = agentResumed
		}
		m.gone = false
	}
	if r.self != nil && r.self.nodeID != "" {
		if m.nodeID != "" && r.self.nodeID != m.nodeID {
			m.noteReset(fmt.Sprintf("the agent's node ID changed from %s to %s", m.nodeID, r.self.nodeID))
		}
		m.nodeID = r.self.nodeID
	}
}

// noteReset records that Consul lost its state, for the loop to apply.
func (m *agentMonitor) noteReset(why string) { m.due, m.why = agentReset, why }

// take returns the change the loop has to apply, and forgets it.
func (m *agentMonitor) take() (agentChange, string) {
	c, why := m.due, m.why
	m.due, m.why = agentSame, ""
	return c, why
}

// settled opens the gate once the loop has applied what the agent's
// return changed.
func (m *agentMonitor) settled() {
	if m.phase == agentUp {
		m.cl.gate.reopen()
	}
}

// answered notes an answer of the agent to a request other than the
// probe's, and reports whether the answer must be dropped. While the probe
// finds down an agent that went away, an answer (to a request that slipped
// past the gate as it shut) is the first sign that the agent is back, with
// whatever state: the reset is noted before anything of that state is
// applied, and the answer, asked before the reset, is asked again.
func (m *agentMonitor) answered() (drop bool) {
	if m.phase != agentDown || !m.gone {
		return false
	}
	m.gone = false
	m.noteReset("the agent answers again after it went away")
	return true
}

// fail records a failure of a read, a blocking query or the probe: the
// status turns stale, and the failure log says so when a failing period
// starts (and once a minute while it lasts). One without an HTTP answer
// (refused, cut, timed out, a failed handshake) may mean that the agent
// is gone: the probe is asked to look soon (a kick shortens its wait
// once), and while the probe fails such an error says whether the agent's
// process went away. A 403 has the loop read token_file again.
func (m *agentMonitor) fail(err error) {
	m.status.Failed(err)
	m.flog.Failed(err)
	switch code := statusCode(err); {
	case code == 0:
		m.wake()
		if m.phase == agentDown && wentAway(err) {
			m.gone = true
		}
	case code == http.StatusForbidden:
		m.forbidden = true
	}
}

// wake asks the probe to look soon.
func (m *agentMonitor) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// errNoLeader is the failure recorded while answers say
// X-Consul-KnownLeader: false: they may be old, and the source says so.
var errNoLeader = errors.New("consul answers without a known leader (X-Consul-KnownLeader: false)")

// noteLeader records whether an answer came with a known leader.
func (m *agentMonitor) noteLeader(meta *api.QueryMeta) {
	switch {
	case meta == nil:
	case !meta.KnownLeader:
		if !m.leaderless {
			m.leaderless = true
			m.fail(errNoLeader)
		}
	case m.leaderless:
		m.leaderless = false
	}
}

// polled records the outcome of a bulk query of datacenter dc.
func (m *agentMonitor) polled(dc int, kind pollKind, err error) {
	key := [2]int{dc, int(kind)}
	if err != nil {
		m.pollErr[key] = true
		m.fail(err)
		return
	}
	delete(m.pollErr, key)
}

// catalogFailing reports whether the catalog query of datacenter dc
// failed last.
func (m *agentMonitor) catalogFailing(dc int) bool { return m.pollErr[[2]int{dc, int(pollServices)}] }

// failing reports whether the agent, or a bulk query, fails at this
// moment.
func (m *agentMonitor) failing() bool {
	return m.phase != agentUp || len(m.pollErr) > 0 || m.leaderless
}

// recovered records that nothing fails: the status is fresh, and the
// failure log says when a failing period ended.
func (m *agentMonitor) recovered() {
	m.flog.Recovered()
	m.status.Succeeded()
}

// wentAway reports whether err shows that the agent's process is not there
// any more: the connection was refused (or its socket file is gone), or
// cut before an answer. An agent that went away may come back with any
// state; one that only stopped answering (a timeout), presented a
// certificate the source does not trust, or lost its leader is the same
// process with the same state when it answers again.
func wentAway(err error) bool {
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ENOENT, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
