package xds

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// admission is what admits a stream's traffic: the send budget, which
// large responses in flight to all clients together wait for
// (wire/budget.go); the request budget, which large requests being decoded
// and handled wait for; and the first-read leases, which new streams take
// turns with before they read their first request (wire/admit.go). Each
// has its own lock; none is taken under Server.mu. Which streams are
// served at all (Limits.Streams, Limits.StreamsPerConnection) is the
// registry's, under Server.mu.
type admission struct {
	sendBudget    *wire.Budget     // responses in flight
	requestBudget *wire.Budget     // requests being decoded and handled
	reads         *wire.FirstReads // leases of new streams' first reads
}

func newAdmission(send, request int) admission {
	return admission{
		sendBudget:    wire.NewBudget(send),
		requestBudget: wire.NewBudget(request),
		reads:         wire.NewFirstReads(request),
	}
}

// InFlight is the bytes charged to the send and request budgets: large
// responses accepted for sending and not yet written, and large requests
// being decoded and handled. While it is above zero the server is in the
// middle of a storm even if it allocates nothing (it writes shared
// encoded records, and a slow client can keep it waiting for seconds);
// the memory return policy reads it so as not to collect then.
func (a *admission) InFlight() int64 { return a.sendBudget.InUse() + a.requestBudget.InUse() }

// inbound is what a stream's next request is received into, admitted by
// the request budget; a stream's first request also waits for a
// first-read lease, which the caller gives back once the request is read
// (Inbound.ReleaseLease). It fails only when ctx ends while waiting.
func (a *admission) inbound(ctx context.Context, req proto.Message, first bool) (*wire.Inbound, error) {
	var lease *wire.ReadLease
	if first {
		l, err := a.reads.Lease(ctx)
		if err != nil {
			return nil, err
		}
		lease = l
	}
	return wire.NewInbound(ctx, req, a.requestBudget, lease), nil
}
