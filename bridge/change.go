package bridge

import "github.com/xdsbridge/xdsbridge/xds"

// batcher is an applier that also takes a change a resource at a time
// (see xds.Batch).
type batcher interface {
	Batch() *xds.Batch
}

// change is one Apply of the publisher, built as services are translated.
// An engine that takes a change a resource at a time (batcher) is given
// each resource at once, and marshals it, so that the publisher lets go
// of a service's messages before it translates the next: a first state
// of 100,000 services would otherwise hold every message at once, most
// of the process's peak heap, and the runtime keeps its bookkeeping for
// the largest heap it ever had. Another applier (a dry run's collector)
// gets the resources together in one Apply.
type change struct {
	a    applier
	b    *xds.Batch
	ups  []xds.Resource
	rems []xds.Key
	n    int // resources upserted
	rm   int // removals
}

// newChange starts one Apply on a.
func newChange(a applier) *change {
	if b, ok := a.(batcher); ok {
		return &change{a: a, b: b.Batch()}
	}
	return &change{a: a}
}

func (c *change) upsert(rs ...xds.Resource) {
	c.n += len(rs)
	if c.b == nil {
		c.ups = append(c.ups, rs...)
		return
	}
	for _, r := range rs {
		c.b.Upsert(r)
	}
}

func (c *change) remove(ks ...xds.Key) {
	c.rm += len(ks)
	if c.b == nil {
		c.rems = append(c.rems, ks...)
		return
	}
	for _, k := range ks {
		c.b.Remove(k)
	}
}

// empty reports whether nothing was added to the change.
func (c *change) empty() bool { return c.n+c.rm == 0 }

// apply applies the change and returns the number of resources it
// upserted.
func (c *change) apply() int {
	if c.b != nil {
		c.b.Apply()
	} else {
		c.a.Apply(c.ups, c.rems)
	}
	return c.n
}
