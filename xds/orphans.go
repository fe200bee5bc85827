package xds

import (
	"sync"
	"sync/atomic"
)

// An orphan is a slot whose last owed removal a writer sent: writers hold
// only client.mu, so they queue it, and it is released under Server.mu by
// the writer once it has nothing left to send (orphanQueue.reap), or by
// the next Apply, whichever comes first.
type orphan struct {
	t  *typeState
	sl *slot
}

// orphanQueue is the orphans waiting for Server.mu. It has its own lock,
// mu, which guards list and is taken under client.mu or Server.mu, never
// the other way; queued says list is not empty, so that a writer that
// runs out of work looks with one atomic load.
type orphanQueue struct {
	mu     sync.Mutex
	list   []orphan
	queued atomic.Bool
}

// add queues sl of t for release. It takes only the queue's lock.
func (q *orphanQueue) add(t *typeState, sl *slot) {
	q.mu.Lock()
	q.list = append(q.list, orphan{t, sl})
	q.queued.Store(true)
	q.mu.Unlock()
}

// release releases the queued slots that nothing references any more (a
// slot may have been given an entry, or been claimed, since it was
// queued). Server.mu held.
func (q *orphanQueue) release() {
	if !q.queued.Load() {
		return
	}
	q.mu.Lock()
	list := q.list
	q.list = nil
	q.queued.Store(false)
	q.mu.Unlock()
	for _, o := range list {
		o.t.release(o.sl)
	}
}

// reap takes serverMu (Server.mu) to release the queued orphans, if there
// are any. No lock held.
func (q *orphanQueue) reap(serverMu *sync.Mutex) {
	if q.queued.Load() {
		serverMu.Lock()
		q.release()
		serverMu.Unlock()
	}
}
