package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/xdsbridge/xdsbridge/sources"
)

// reader is what the loop needs of the client: the reads that arm one
// watch each. *zk.Conn implements it.
type reader interface {
	ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error)
	GetW(path string) ([]byte, *zk.Stat, <-chan zk.Event, error)
	ExistsW(path string) (bool, *zk.Stat, <-chan zk.Event, error)
	AddAuth(scheme string, auth []byte) error
}

// readWindow bounds the reads of a pass that were begun and whose results
// the loop has not taken yet: enough to keep the connection busy during
// the first read of a large tree, few enough that the server's queue for
// one session stays short, and fixed, so that neither the goroutines nor
// the results waiting grow with the tree.
const readWindow = 32

// errNoSession fails a read that would wait for a session.
var errNoSession = errors.New("no ZooKeeper session")

// loop owns the source's watches: the tree, the session as the inbox
// reports it, the pacing of failed reads, and what was published. It runs
// on Run's goroutine alone.
type loop struct {
	s   *Source
	zk  reader
	in  *inbox
	out sources.Outage
	t   *tree

	bo      sources.Backoff // paces the retries of failed reads
	retryAt time.Time       // failed reads wait until then; zero: none wait
	failed  map[string]bool // znodes whose last read failed

	session   bool            // the client has a session
	authed    bool            // the digest identity was added to this session
	synced    bool            // the first Full update went out
	full      bool            // the next update is Full: first read, or re-read after the session expired
	reset     bool            // ... and says the registry may be refilling
	published map[string]bool // clusters last sent
	noted     int             // len(t.bad) when the status note was last set
}

func newLoop(s *Source, r reader, in *inbox) *loop {
	return &loop{
		s: s, zk: r, in: in, t: newTree(&s.cfg),
		out:       sources.Outage{Log: s.log, Status: s.status, Failing: msgFailing, Recovered: msgRecovered},
		bo:        sources.Backoff{Min: s.cfg.RetryMin, Max: s.cfg.RetryMax},
		failed:    map[string]bool{},
		full:      true,
		published: map[string]bool{},
		noted:     -1,
	}
}

// Log messages of the state changes (tests look for them).
const (
	msgFailing   = "zookeeper unreachable or failing; serving the last good state until it recovers"
	msgRecovered = "zookeeper reads recovered; watches armed"
	msgExpired   = "zookeeper session expired; reading every watched path again (the removal guard keeps the last good state while registrars re-register)"
)

// run is the loop: take what the client reported, read what changed,
// publish, wait.
func (l *loop) run(ctx context.Context, up chan<- sources.Update) error {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		l.absorb(l.in.take())
		if l.session && !l.authed {
			l.authenticate()
		}
		if l.session && l.authed {
			l.pass(ctx)
		}
		if u, ok := l.update(); ok {
			select {
			case up <- u:
			case <-ctx.Done():
				return nil
			}
		}
		l.settle()
		if !l.retryAt.IsZero() {
			retry.Reset(time.Until(l.retryAt))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.in.wake:
		case <-retry.C:
		}
	}
}

// absorb applies what the inbox holds.
func (l *loop) absorb(m mail) {
	for _, err := range m.dialFails {
		l.out.Fail(err)
	}
	was := l.session
	l.session = m.state == zk.StateHasSession
	if m.lost || m.expired || !l.session {
		l.authed = l.authed && l.session && !m.lost && !m.expired
	}
	if m.expired {
		l.s.log.Info(msgExpired)
		l.t.restart()
		clear(l.failed)
		l.full, l.reset = true, l.synced
	}
	if (m.lost || m.expired) && !l.session {
		l.out.Fail(errors.New("connection to zookeeper lost"))
	}
	if l.session && (!was || m.lost) {
		// Back on a session: what failed for want of one is due now.
		l.retryAt = time.Time{}
	}
	for _, p := range m.paths {
		if l.t.known(p) {
			l.t.dirty[p] = true
		}
	}
}

// authenticate adds the digest identity to a new session (the library
// adds it again to every session that follows).
func (l *loop) authenticate() {
	if l.s.cfg.Auth.User == "" {
		l.authed = true
		return
	}
	pw, err := l.s.cfg.password()
	if err == nil {
		err = l.zk.AddAuth("digest", []byte(l.s.cfg.Auth.User+":"+pw))
	}
	if err != nil {
		l.out.Fail(fmt.Errorf("authenticating as %s: %w", l.s.cfg.Auth.User, err))
		l.later()
		return
	}
	l.authed = true
}

// pass reads the dirty znodes, and the znodes those reads show, until
// none is left but those whose read failed. Failed reads are retried
// after the backoff, not by the next event: an event may shorten no wait.
func (l *loop) pass(ctx context.Context) {
	due := l.retryAt.IsZero() || !time.Now().Before(l.retryAt)
	if due {
		clear(l.failed)
	}
	var lastErr error
	for ctx.Err() == nil {
		// Events that came in while the last round read: ZooKeeper sends a
		// session's watch events before the answers to its later reads, so
		// the changes of one transaction (every znode of a registrar whose
		// session ended) are all here by now, and go out in one update.
		l.absorb(l.in.take())
		var todo []string
		for p := range l.t.dirty {
			if !l.failed[p] {
				todo = append(todo, p)
			}
		}
		if len(todo) == 0 {
			break
		}
		slices.Sort(todo)
		for r := range l.fetch(todo) {
			if r.err != nil {
				l.failed[r.path] = true
				lastErr = r.err
				continue
			}
			if r.again {
				continue // created meanwhile: read it in the next round
			}
			if n := l.t.apply(r.read); n > 0 {
				l.s.status.Dropped(n)
			}
		}
	}
	for p := range l.failed {
		if !l.t.dirty[p] {
			delete(l.failed, p) // no longer watched, or read since
		}
	}
	switch {
	case len(l.failed) > 0:
		l.out.Fail(fmt.Errorf("reading %d znodes: %w", len(l.failed), lastErr))
		l.later()
	case due:
		l.retryAt = time.Time{}
		l.bo.Reset()
	}
	l.noteBad()
}

// later schedules the next attempt of what failed.
func (l *loop) later() { l.retryAt = time.Now().Add(l.bo.Next()) }

// result is one read of fetch.
type result struct {
	read
	again bool // a missing znode existed by the time its creation was watched
	err   error
}

// fetch reads the znodes at paths and yields their results in the order
// of paths, on the caller's goroutine. readWindow lanes read: lane k reads
// paths k, k+readWindow, ... and begins its next read only once the
// caller took its last result, so at most readWindow reads are in flight
// or waiting. ZooKeeper answers a session's requests in the order they
// were sent, so taking the results in order keeps the window full. A read
// arms the watch of what it reads: the children of a directory, the data
// of an instance, or, for a znode that does not exist, its creation. The
// caller may change the tree while it takes results; the lanes do not
// touch it.
func (l *loop) fetch(paths []string) iter.Seq[result] {
	return func(yield func(result) bool) {
		members := make([]bool, len(paths))
		for i, p := range paths {
			members[i] = l.t.isMember(p)
		}
		lanes := make([]chan result, min(readWindow, len(paths)))
		for k := range lanes {
			lanes[k] = make(chan result)
			go func() {
				for i := k; i < len(paths); i += len(lanes) {
					lanes[k] <- l.readOne(paths[i], members[i])
				}
			}()
		}
		// Every result is taken, even after yield says stop, so that every
		// lane ends.
		more := true
		for i := range paths {
			r := <-lanes[i%len(lanes)]
			more = more && yield(r)
		}
	}
}

func (l *loop) readOne(path string, isMember bool) result {
	r := result{read: read{path: path}}
	if !l.in.up.Load() {
		r.err = errNoSession
		return r
	}
	var st *zk.Stat
	if isMember {
		r.data, st, _, r.err = l.zk.GetW(path)
	} else {
		r.children, st, _, r.err = l.zk.ChildrenW(path)
	}
	if st != nil {
		r.version = st.Version
	}
	if !errors.Is(r.err, zk.ErrNoNode) {
		if r.err != nil {
			r.err = fmt.Errorf("reading %s: %w", path, r.err)
		}
		return r
	}
	r.err, r.missing = nil, true
	if isMember {
		return r // its directory's watch tells when it comes back
	}
	ok, _, _, err := l.zk.ExistsW(path)
	switch {
	case err != nil:
		r.err = fmt.Errorf("watching for %s: %w", path, err)
	case ok:
		r.again = true
	}
	return r
}

// update returns what to publish, if anything. A Full update waits for a
// complete read: nothing dirty or failed.
func (l *loop) update() (sources.Update, bool) {
	if l.full {
		if !l.session || !l.authed || len(l.t.dirty) > 0 {
			return sources.Update{}, false
		}
		u := sources.Update{Full: true, Reset: l.reset}
		clear(l.published)
		for _, name := range l.t.names() {
			if svc, ok := l.t.build(name); ok {
				u.Services = append(u.Services, svc)
				l.published[name] = true
			}
		}
		l.full, l.reset, l.synced = false, false, true
		clear(l.t.changed)
		return u, true
	}
	if len(l.t.changed) == 0 {
		return sources.Update{}, false
	}
	var u sources.Update
	for _, name := range slices.Sorted(maps.Keys(l.t.changed)) {
		svc, ok := l.t.build(name)
		switch {
		case ok:
			u.Services = append(u.Services, svc)
			l.published[name] = true
		case l.published[name]:
			u.Removed = append(u.Removed, name)
			delete(l.published, name)
		}
	}
	clear(l.t.changed)
	return u, len(u.Services)+len(u.Removed) > 0
}

// settle marks the source healthy once it is synced, has a session, and
// nothing failed.
func (l *loop) settle() {
	if l.synced && l.session && l.authed && len(l.failed) == 0 && !l.full {
		l.out.Recover()
	}
}

// noteBad names the instance znodes not served in the status, and logs
// when their number changes.
func (l *loop) noteBad() {
	if len(l.t.bad) == l.noted {
		return
	}
	l.noted = len(l.t.bad)
	if l.noted == 0 {
		l.s.status.Note(noteDropped, "")
		return
	}
	const shown = 3
	paths := slices.Sorted(maps.Keys(l.t.bad))
	why := make([]string, 0, shown)
	for _, p := range paths[:min(shown, len(paths))] {
		why = append(why, p+": "+l.t.bad[p])
	}
	more := ""
	if len(paths) > shown {
		more = fmt.Sprintf("; and %d more", len(paths)-shown)
	}
	l.s.status.Note(noteDropped, fmt.Sprintf("%d znodes not served: %s%s", len(paths), strings.Join(why, "; "), more))
	l.s.log.Warn("instance znodes that cannot be served are dropped", "znodes", len(paths), "first", why[0])
}

// noteDropped is the status note naming the znodes not served.
const noteDropped = "dropped_znodes"
