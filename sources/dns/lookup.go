package dns

import (
	"context"
	"errors"
	"sync"

	mdns "github.com/miekg/dns"
)

// targetQueries is how many SRV targets are resolved concurrently.
const targetQueries = 8

// entry is one configured name and the cluster it feeds.
type entry struct {
	cluster string
	kind    Kind
	name    string
	port    uint32 // KindHost only
}

// lookup resolves one entry. The error is a failure (server errors,
// timeouts, malformed responses): the caller keeps the last good state.
// Authoritative negative answers are not errors; they convert to an empty
// result.
//
// The answers of SRV targets come from the additional section of the SRV
// response when it holds an address of the family for them; the other
// targets are queried (A and/or AAAA). A target whose queries are answered
// negatively yields no endpoint and counts as dropped; a target whose query
// fails makes the whole lookup fail, since a failing server must not
// remove endpoints.
func lookup(ctx context.Context, r *resolver, e entry, fam Family) (Result, error) {
	in := Input{Kind: e.kind, Name: e.name, Port: e.port, Family: fam}
	var err error
	if e.kind == KindHost {
		in.Name, in.Msgs, err = addrQueries(ctx, r, e.name, fam)
	} else {
		in.Name, in.Msgs, err = r.query(ctx, e.name, mdns.TypeSRV)
		if err == nil {
			var more []*mdns.Msg
			more, err = resolveTargets(ctx, r, in.Name, in.Msgs, fam)
			in.Msgs = append(in.Msgs, more...)
		}
	}
	if err != nil && !errors.Is(err, errNegative) {
		return Result{}, err
	}
	return Convert(in), nil
}

// addrQueries asks for the A and/or AAAA records of name. It fails when a
// query fails, and returns errNegative only when every query was answered
// negatively.
func addrQueries(ctx context.Context, r *resolver, name string, fam Family) (string, []*mdns.Msg, error) {
	var msgs []*mdns.Msg
	found := ""
	for _, t := range []uint16{mdns.TypeA, mdns.TypeAAAA} {
		if !fam.wants(t) {
			continue
		}
		n, got, err := r.query(ctx, name, t)
		msgs = append(msgs, got...)
		switch {
		case err == nil:
			if found == "" {
				found = n
			}
		case !errors.Is(err, errNegative):
			return "", nil, err
		}
	}
	if found == "" {
		return mdns.Fqdn(name), msgs, errNegative
	}
	return found, msgs, nil
}

// resolveTargets queries the addresses of the SRV targets of name that
// msgs do not resolve, a bounded number at a time.
func resolveTargets(ctx context.Context, r *resolver, name string, msgs []*mdns.Msg, fam Family) ([]*mdns.Msg, error) {
	x := newIndex(msgs)
	final, _ := x.chase(mdns.CanonicalName(name))
	records := x.srv[final]
	if len(records) > MaxRecords {
		records = records[:MaxRecords]
	}
	seen := map[string]bool{}
	var todo []string
	for _, rr := range records {
		t := mdns.CanonicalName(rr.Target)
		if t == "." || seen[t] {
			continue
		}
		seen[t] = true
		if _, ok := x.resolved(t, fam); !ok {
			todo = append(todo, t)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu  sync.Mutex
		out []*mdns.Msg
	)
	bounded(ctx, len(todo), targetQueries, func(k int) {
		_, got, err := addrQueries(ctx, r, todo[k], fam)
		if err != nil && !errors.Is(err, errNegative) {
			cancel(err)
			return
		}
		mu.Lock()
		out = append(out, got...)
		mu.Unlock()
	})
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// bounded calls do(k) for every k in [0, n), each in a goroutine of its
// own, at most limit at a time, and returns once every call it started has
// returned. It starts no more calls once ctx is done.
func bounded(ctx context.Context, n, limit int, do func(k int)) {
	var wg sync.WaitGroup
	sema := make(chan struct{}, limit)
	for k := range n {
		select {
		case sema <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sema }()
			do(k)
		})
	}
	wg.Wait()
}
