package consul

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
)

// Connection budgets shared by the sources of one agent.
//
// The agent's limit on connections (limits.http_max_conns_per_client)
// counts every connection from one client address, whichever source
// instance opened it. A reload that changes a source's entry runs the new
// instance beside the old one until the new one has synced, and two
// entries may name one agent: instances that each planned the budget
// alone would together hold more than the agent allows, and the agent
// would refuse the rest with 429s. So the instances of one agent share one
// budget (agentBudget): each plans with its share of it (budgetShare), and
// every connection any of them opens is counted against the whole, so
// that they never hold more together than one instance alone would, even
// while a share shrinks and its owner has not yet closed what it no longer
// may hold.
//
// The register of budgets (agentBudgets) is process-wide because what it
// models is: the agent counts connections by client address, and every
// source instance in the process connects from the same addresses,
// whichever bridge, manager or test built it. A budget exists only while
// an instance uses its agent or a connection to it is open, so the
// agents a process once used leave nothing behind.

// budgets is the register every source of the process joins.
var budgets = &agentBudgets{agents: map[string]*agentBudget{}}

// agentBudgets holds a budget per agent, keyed by agentKey. Its mutex
// guards every budget and share in it.
type agentBudgets struct {
	mu     sync.Mutex
	agents map[string]*agentBudget
}

// agentBudget is the connections the instances of one agent share.
//
// The budget is the largest of what its members would hold alone (their
// want: max_connections, or three quarters of the agent's limit, see
// Config.alone). A member learns its want only once the agent answered
// it, and until then it takes no part of the budget: an instance that
// fails before that, or never gets that far (a token the agent refuses),
// costs the others nothing, and one that fails and is restarted over and
// over does not make them plan again at each start. Such a member waits
// for room like any other; only when its dial finds none does it claim
// its floor, which the others then leave it (claimed). Each member whose
// want is known gets an even part of the rest, never more than it wants,
// never less than it needs to work at all (floor).
//
// The connections open now are counted (held); a dial waits while held
// is at capacity (acquire). held may be above capacity for a while: a
// member that leaves, or whose want drops, may still have connections
// open beyond what the budget now allows, until they close.
type agentBudget struct {
	key     string
	members []*budgetShare
	held    int
	// room is closed, and replaced, whenever held drops or the budget
	// grows: the dials waiting for room look again.
	room chan struct{}
}

// budgetShare is one source instance's membership of its agent's budget.
// The fields are guarded by the register's mutex.
type budgetShare struct {
	reg   *agentBudgets
	agent *agentBudget
	// want is what the instance would hold alone (0 until it knows the
	// agent's limit); floor the fewest connections it works with.
	want, floor int
	// claimed: the instance, not knowing its want yet, found no room for
	// a connection; the others leave it its floor.
	claimed bool
	now     share
	// changed receives a value when now changed.
	changed chan struct{}
}

// share is the part of its agent's budget an instance may hold: conns
// connections, the budget being shared by of instances (0: alone, the
// instance plans on its own; the members that take no part of the budget
// yet are not counted).
type share struct {
	conns, of int
}

// agentKey names the agent a source talks to: its scheme and address, as
// configured. Two spellings of one agent (a host name and its address, or
// the agent's HTTP and HTTPS ports) are two budgets.
func (c *Config) agentKey() string {
	addr := strings.TrimSuffix(strings.ToLower(c.Address), "/")
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		addr = rest
	}
	return c.Scheme + "://" + addr
}

// join makes a new instance a member of the budget of the agent at key;
// it needs at least floor connections. The instance leaves when it stops.
func (r *agentBudgets) join(key string, floor int) *budgetShare {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.agents[key]
	if a == nil {
		a = &agentBudget{key: key, room: make(chan struct{})}
		r.agents[key] = a
	}
	m := &budgetShare{reg: r, agent: a, floor: floor, changed: make(chan struct{}, 1)}
	a.members = append(a.members, m)
	a.rebalance()
	return m
}

// leave ends the membership: the others' shares grow. The budget is
// forgotten once no member is left and no connection is open.
func (m *budgetShare) leave() {
	r := m.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	a := m.agent
	a.members = slices.DeleteFunc(a.members, func(o *budgetShare) bool { return o == m })
	a.rebalance()
	r.forget(a)
}

// setWant records what the instance would hold alone, once it knows (and
// whenever the agent's limit changes).
func (m *budgetShare) setWant(want int) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	m.want = want
	m.agent.rebalance()
}

// current returns the instance's share now.
func (m *budgetShare) current() share {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	return m.now
}

// forget drops a's entry when nothing uses it. Called with r.mu held.
func (r *agentBudgets) forget(a *agentBudget) {
	if len(a.members) == 0 && a.held == 0 && r.agents[a.key] == a {
		delete(r.agents, a.key)
	}
}

// size is the budget: the largest want of its members (0 when none knows
// its own yet).
func (a *agentBudget) size() int {
	n := 0
	for _, m := range a.members {
		n = max(n, m.want)
	}
	return n
}

// capacity is how many connections may be open at once: the budget, or
// the members' floors when they need more (a budget too small for the
// instances it is shared by).
func (a *agentBudget) capacity() int {
	floors := 0
	for _, m := range a.members {
		floors += m.floor
	}
	return max(a.size(), floors)
}

// rebalance gives each member its share of the budget, tells those whose
// share changed, and lets waiting dials look at the room again. Called
// with the register's mutex held.
//
// The members whose want is known split what the claims leave of the
// budget; a member that claimed its floor is given that; a member that
// neither knows its want nor claimed is not counted and has the zero
// share, which nothing reads before its want is known.
func (a *agentBudget) rebalance() {
	size, claims, known, n := a.size(), 0, 0, 0
	for _, m := range a.members {
		switch {
		case m.want > 0:
			known++
		case m.claimed:
			claims += m.floor
		default:
			continue
		}
		n++
	}
	for _, m := range a.members {
		s := share{}
		switch {
		case n <= 1:
		case m.want > 0:
			s = share{conns: max(m.floor, min(m.want, (size-claims)/known)), of: n}
		case m.claimed:
			s = share{conns: m.floor, of: n}
		}
		if s != m.now {
			m.now = s
			select {
			case m.changed <- struct{}{}:
			default:
			}
		}
	}
	a.wake()
}

// wake lets the dials waiting for room look again.
func (a *agentBudget) wake() {
	close(a.room)
	a.room = make(chan struct{})
}

// acquire waits until a connection may be opened and counts it, or
// returns the error of whichever of ctx and stop ends first. A member that
// does not know its want yet and finds no room claims its floor, so that
// the others make room for it.
func (m *budgetShare) acquire(ctx, stop context.Context) error {
	r := m.reg
	for {
		r.mu.Lock()
		a := m.agent
		if a.held < a.capacity() {
			a.held++
			r.mu.Unlock()
			return nil
		}
		if m.want == 0 && !m.claimed {
			m.claimed = true
			a.rebalance()
		}
		room := a.room
		r.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop.Done():
			return stop.Err()
		}
	}
}

// release uncounts a connection that closed (or was never opened).
func (m *budgetShare) release() {
	r := m.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	a := m.agent
	a.held--
	a.wake()
	r.forget(a)
}

// dialFunc dials a connection, as net.Dialer.DialContext does.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dialer returns dial counted against the budget: a connection is dialed
// once there is room for it, and counted until it is closed. Dials still
// waiting when stop ends (the instance stopped) give up.
func (m *budgetShare) dialer(stop context.Context, dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := m.acquire(ctx, stop); err != nil {
			return nil, err
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			m.release()
			return nil, err
		}
		return &budgetConn{Conn: c, release: sync.OnceFunc(m.release)}, nil
	}
}

// budgetConn is a connection counted against its agent's budget until it
// is closed.
type budgetConn struct {
	net.Conn
	release func()
}

func (c *budgetConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
