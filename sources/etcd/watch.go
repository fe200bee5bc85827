package etcd

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// readPageSize is how many keys one read request asks for: a prefix of
// 10,000 instances is read in 10 requests of a few hundred KB, none of
// which holds etcd's lock long.
const readPageSize = 1000

// readPrefixes reads every key under the entries' prefixes at one
// revision: the first request is linearizable (it sees every write
// acknowledged before it) and fixes the revision the others read at. It
// returns the keys and the first answer's header.
func readPrefixes(ctx context.Context, c clientv3.KV, entries []Entry, timeout time.Duration) (map[string]kv, *pb.ResponseHeader, error) {
	out := map[string]kv{}
	var hdr *pb.ResponseHeader
	for _, e := range entries {
		key, end := e.Prefix, clientv3.GetPrefixRangeEnd(e.Prefix)
		for {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(readPageSize)}
			if hdr != nil {
				opts = append(opts, clientv3.WithRev(hdr.Revision))
			}
			rctx, cancel := context.WithTimeout(ctx, timeout)
			resp, err := c.Get(rctx, key, opts...)
			cancel()
			if err != nil {
				return nil, nil, fmt.Errorf("reading %s: %w", e.Prefix, err)
			}
			if hdr == nil {
				hdr = resp.Header
			}
			for _, x := range resp.Kvs {
				out[string(x.Key)] = kv{value: x.Value, modRev: x.ModRevision}
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	return out, hdr, nil
}

// watchSet is the watches of one revision: one per prefix, all on one
// gRPC stream (the etcd client puts the watches of one context on one
// stream), their answers forwarded to out in order per prefix.
type watchSet struct {
	out  chan watchMsg
	stop context.CancelFunc
}

// watchMsg is one answer of the watch of services[i], or closed when that
// watch ended.
type watchMsg struct {
	i      int
	resp   clientv3.WatchResponse
	closed bool
}

// watch starts a watch of every prefix from the revision after the one
// the source has seen. Each asks for its creation to be confirmed: the
// confirmation's header says where etcd's revision stands. The watches
// require a leader: a member cut off from the others ends them with an
// error instead of serving silence.
//
// The etcd client's Watch blocks until the watch is registered on a
// stream, which waits for a connection: each is called from its own
// goroutine, so that the loop goes on noticing a connection lost
// meanwhile (and cancels them).
func (l *loop) watch(ctx context.Context, cli *clientv3.Client) *watchSet {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	w := &watchSet{out: make(chan watchMsg), stop: cancel}
	for i, e := range l.s.cfg.Services {
		rev := l.revs[i] + 1
		go func() {
			wch := cli.Watch(wctx, e.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithCreatedNotify())
			for r := range wch {
				select {
				case w.out <- watchMsg{i: i, resp: r}:
				case <-wctx.Done():
					return
				}
			}
			select {
			case w.out <- watchMsg{i: i, closed: true}:
			case <-wctx.Done():
			}
		}()
	}
	return w
}
