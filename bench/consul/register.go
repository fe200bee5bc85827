package consul

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xdsbridge/xdsbridge/bench/workload"
)

// The services no event touches are written as a catalog sync (consul-k8s,
// ESM) writes them: catalog transactions, several in flight so that Raft
// commits them in batches, each on a node of its own (bulkNode). One node
// for all would make registration quadratic: for every service instance
// written, Consul's event publisher reads every check of its node. The
// services the events change are registered through the agent (their
// TTL checks and maintenance need it).
const (
	// txnServices services of 5 operations each (3 services, 2 checks)
	// and their node fill a transaction: Consul 1.14 takes at most 128
	// operations.
	txnServices = 25
	// txnInFlight transactions are sent at once.
	txnInFlight = 8
)

// BulkNode names the catalog node of the b-th transaction.
func BulkNode(b int) string { return fmt.Sprintf("bench-sync-%04d", b) }

// RegisterAll registers services × 3 instances: instances 0 and 1 with a
// passing check, instance 2 without checks. It stops when ctx ends.
func RegisterAll(ctx context.Context, c *api.Client, cfg EventsConfig) error {
	targets := map[int]bool{}
	for n := range cfg.PerEvent {
		targets[eventTarget(n, cfg.Services)] = true
	}
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	slots := make(chan struct{}, txnInFlight)
	txn := func(ops api.TxnOps) {
		select {
		case slots <- struct{}{}:
		case <-gctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			ok, resp, _, err := c.Txn().Txn(ops, (&api.QueryOptions{}).WithContext(gctx))
			switch {
			case err != nil:
				cancel(fmt.Errorf("registering services: %w", err))
			case !ok:
				cancel(fmt.Errorf("registering services: transaction failed: %v", resp.Errors))
			}
		})
	}
	var ops api.TxnOps
	batch := 0
	for i := range cfg.Services {
		if gctx.Err() != nil {
			break
		}
		if targets[i] {
			for j := range Instances {
				if err := c.Agent().ServiceRegisterOpts(Instance(i, j, basePort(j), j < 2), api.ServiceRegisterOpts{}.WithContext(gctx)); err != nil {
					cancel(fmt.Errorf("registering %s: %w", workload.Name(i), err))
					break
				}
			}
			continue
		}
		node := BulkNode(batch)
		if len(ops) == 0 {
			ops = append(ops, &api.TxnOp{Node: &api.NodeTxnOp{Verb: api.NodeSet,
				Node: api.Node{Node: node, Address: fmt.Sprintf("10.255.%d.%d", batch>>8&255, batch&255)}}})
		}
		for j := range Instances {
			r := Instance(i, j, basePort(j), false)
			ops = append(ops, &api.TxnOp{Service: &api.ServiceTxnOp{Verb: api.ServiceSet, Node: node,
				Service: api.AgentService{ID: r.ID, Service: r.Name, Address: r.Address, Port: r.Port}}})
			if j < 2 {
				ops = append(ops, &api.TxnOp{Check: &api.CheckTxnOp{Verb: api.CheckSet, Check: api.HealthCheck{
					Node: node, CheckID: r.ID + "-check", Name: "bench", Status: api.HealthPassing, ServiceID: r.ID}}})
			}
		}
		if len(ops) >= 1+txnServices*5 {
			txn(ops)
			ops = nil
			batch++
		}
	}
	if len(ops) > 0 {
		txn(ops)
	}
	wg.Wait()
	if gctx.Err() != nil {
		return context.Cause(gctx)
	}
	return nil
}

// eventTarget is the service the n-th round of events changes (in the
// first half; churn stays in the second).
func eventTarget(n, services int) int { return (n*7919 + 13) % max(1, services/2) }

func basePort(j int) int { return 8000 + j }

// Instance is the registration of instance j of service i on port, with a
// passing TTL check when checked.
func Instance(i, j, port int, checked bool) *api.AgentServiceRegistration {
	r := &api.AgentServiceRegistration{ID: fmt.Sprintf("%s-%d", workload.Name(i), j), Name: workload.Name(i),
		Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: port}
	if checked {
		r.Check = &api.AgentServiceCheck{CheckID: r.ID + "-ttl", TTL: "2h", Status: api.HealthPassing}
	}
	return r
}

// churn adds and removes a check-less extra instance on services of the
// second half (never a target of the events) at cfg.Churn per second,
// until ctx ends; each request carries ctx, so that an interrupt does not
// wait for an agent that is slow to answer.
func churn(ctx context.Context, c *api.Client, cfg EventsConfig, n *atomic.Int64) {
	t := time.NewTicker(time.Duration(float64(time.Second) / cfg.Churn))
	defer t.Stop()
	up := map[int]bool{}
	opts := api.ServiceRegisterOpts{}.WithContext(ctx)
	q := (&api.QueryOptions{}).WithContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		i := cfg.Services/2 + rand.N(cfg.Services-cfg.Services/2)
		id := fmt.Sprintf("%s-churn", workload.Name(i))
		var err error
		if up[i] {
			err = c.Agent().ServiceDeregisterOpts(id, q)
		} else {
			r := Instance(i, 9, 9000, false)
			r.ID = id
			err = c.Agent().ServiceRegisterOpts(r, opts)
		}
		if err == nil {
			up[i] = !up[i]
			n.Add(1)
		}
	}
}
