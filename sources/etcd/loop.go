package etcd

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsbridge/xdsbridge/sources"
)

// Log messages of the state changes (tests look for them).
const (
	msgFailing   = "etcd read or watch failed; serving the last good state until it recovers"
	msgRecovered = "etcd answers again; watching"
	msgCompacted = "the watched revision was compacted; reading the prefixes again"
	msgWentBack  = "etcd's revision went back (a cluster rebuilt or restored); reading the prefixes again"
	msgDropped   = "dropped keys that cannot be served"
)

// noteDropped is the status note naming the keys not served.
const noteDropped = "dropped_keys"

// loop is the state of one Run: what the source knows of its prefixes,
// the revision up to which it knows it, and the pacing of its retries.
// One goroutine owns it.
type loop struct {
	s  *Source
	st *state
	// revs[i] is the revision up to which the source has seen every
	// change under services[i].prefix; 0 before the first read.
	revs []int64
	// clusterID is the cluster that revs belong to.
	clusterID uint64
	bo        sources.Backoff
	out       sources.Outage
}

func newLoop(s *Source) *loop {
	return &loop{
		s:    s,
		st:   newState(s.cfg.Services),
		revs: make([]int64, len(s.cfg.Services)),
		bo:   sources.Backoff{Min: s.cfg.RetryMin, Max: s.cfg.RetryMax},
		out:  sources.Outage{Log: s.log, Status: s.status, Failing: msgFailing, Recovered: msgRecovered},
	}
}

func (l *loop) run(ctx context.Context, up chan<- sources.Update) error {
	for {
		err := l.session(ctx, up)
		if ctx.Err() != nil {
			return nil
		}
		l.out.Fail(err)
		if !sleep(ctx, l.bo.Next()) {
			return nil
		}
	}
}

// errResync ends a watch whose revision cannot be followed any more: the
// prefixes are read again and watched from the read's revision.
type errResync struct{ wentBack bool }

func (e errResync) Error() string { return "resync" }

// session is one connection to etcd: a client, a read of the prefixes
// when the source has none yet, then watches from the revision it knows,
// until the connection is lost, a watch or read fails, or ctx ends. It
// returns why it ended (nil when ctx ended).
//
// A new connection resumes the watches from the last revision seen,
// without reading again: what changed meanwhile arrives as events.
// Where that revision was compacted meanwhile, or etcd's revision is
// behind it (a cluster rebuilt or restored from a backup), the prefixes
// are read once more instead.
func (l *loop) session(ctx context.Context, up chan<- sources.Update) error {
	cli, err := l.s.newClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := l.s.connect(ctx, cli); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := connLost(sctx, cli.ActiveConnection())
	if l.revs[0] == 0 {
		if err := l.read(sctx, cli, up, false); err != nil {
			return err
		}
	}
	for {
		w := l.watch(sctx, cli)
		err := l.follow(sctx, cli.KV, w, lost, up)
		w.stop()
		var rs errResync
		if !errors.As(err, &rs) {
			return err
		}
		if err := l.read(sctx, cli, up, rs.wentBack); err != nil {
			return err
		}
	}
}

// read reads every prefix at one revision and publishes the whole state;
// wentBack marks it as the refill of a store that lost its state
// (sources.Update.Reset).
func (l *loop) read(ctx context.Context, cli *clientv3.Client, up chan<- sources.Update, wentBack bool) error {
	kvs, hdr, err := readPrefixes(ctx, cli.KV, l.s.cfg.Services, l.s.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	if wentBack {
		l.st.forget()
	}
	dropped := l.st.replace(kvs)
	for i := range l.revs {
		l.revs[i] = hdr.Revision
	}
	l.clusterID = hdr.ClusterId
	l.synced()
	l.noteDropped(dropped)
	u := l.st.full()
	u.Reset = wentBack
	return send(ctx, up, &u)
}

// synced records that the source holds etcd's state as of its revisions.
func (l *loop) synced() {
	l.out.Recover()
	l.bo.Reset()
}

// follow applies the watches' events until one fails or the connection
// is lost.
func (l *loop) follow(ctx context.Context, kv clientv3.KV, w *watchSet, lost <-chan struct{}, up chan<- sources.Update) error {
	created := 0
	for {
		var m watchMsg
		select {
		case <-ctx.Done():
			return nil
		case <-lost:
			return errors.New("lost the connection to etcd")
		case m = <-w.out:
		}
		prefix := l.s.cfg.Services[m.i].Prefix
		if m.closed {
			return fmt.Errorf("watching %s: the watch ended", prefix)
		}
		r := m.resp
		if r.CompactRevision != 0 {
			l.s.log.Info(msgCompacted, "prefix", prefix, "revision", l.revs[m.i], "compacted", r.CompactRevision)
			return errResync{}
		}
		if err := r.Err(); err != nil {
			return fmt.Errorf("watching %s: %w", prefix, err)
		}
		if r.Created {
			back, err := l.wentBack(ctx, kv, r.Header)
			if err != nil {
				return err
			}
			if back {
				l.s.log.Warn(msgWentBack, "prefix", prefix, "revision", r.Header.Revision, "seen", l.revs[m.i])
				return errResync{wentBack: true}
			}
			if created++; created == len(l.revs) {
				l.synced()
			}
			continue
		}
		l.apply(m.i, r)
		l.out.Recover()
		if err := send(ctx, up, l.st.changes()); err != nil {
			return nil
		}
	}
}

// wentBack reports whether the store a watch was created on is behind
// what the source has seen, or another cluster. A watch's header may lag
// behind on a member that is catching up, which is no reason to read
// everything again: a revision behind is confirmed by one linearizable
// request (of a single key), whose header says where the cluster stands.
func (l *loop) wentBack(ctx context.Context, kv clientv3.KV, h *pb.ResponseHeader) (bool, error) {
	if h.ClusterId != l.clusterID {
		return true, nil
	}
	if h.Revision >= l.maxRev() {
		return false, nil
	}
	rctx, cancel := context.WithTimeout(ctx, l.s.cfg.RequestTimeout)
	defer cancel()
	resp, err := kv.Get(rctx, l.s.cfg.Services[0].Prefix)
	if err != nil {
		return false, fmt.Errorf("reading etcd's revision: %w", err)
	}
	return resp.Header.ClusterId != l.clusterID || resp.Header.Revision < l.maxRev(), nil
}

func (l *loop) maxRev() int64 {
	var m int64
	for _, r := range l.revs {
		m = max(m, r)
	}
	return m
}

// apply records one watch answer's events for services[i].
func (l *loop) apply(i int, r clientv3.WatchResponse) {
	dropped := 0
	for _, ev := range r.Events {
		key := string(ev.Kv.Key)
		switch ev.Type {
		case clientv3.EventTypePut:
			if l.st.put(key, ev.Kv.Value, ev.Kv.ModRevision) {
				dropped++
			}
		case clientv3.EventTypeDelete:
			// A key deleted, or expired with its lease.
			l.st.del(key)
		}
		l.revs[i] = max(l.revs[i], ev.Kv.ModRevision)
	}
	if r.IsProgressNotify() {
		l.revs[i] = max(l.revs[i], r.Header.Revision)
	}
	l.noteDropped(dropped)
}

// noteDropped counts the keys newly found malformed and refreshes the
// status note that names the keys not served.
func (l *loop) noteDropped(dropped int) {
	if dropped > 0 {
		l.s.status.Dropped(dropped)
		l.s.log.Warn(msgDropped, "dropped", dropped, "not_served", len(l.st.bad))
	}
	l.s.status.Note(noteDropped, l.st.problems())
}

// send delivers u (nothing when nil) unless ctx ends first.
func send(ctx context.Context, up chan<- sources.Update, u *sources.Update) error {
	if u == nil {
		return nil
	}
	select {
	case up <- *u:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
