package consul

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/consul/api"
)

// The kinds of requests the source makes (agentClient's), each with the
// deadline of its kind under the current generation.

// errRenewed marks a request cut short by a renewed generation: not a
// failure, the request is repeated at once.
var errRenewed = errors.New("request restarted")

// errTimeout marks a request that passed its deadline.
var errTimeout = errors.New("timed out")

// request runs do with the deadline of its kind (see Config.ReadTimeout)
// under the current generation, and names a timeout and a renewal as such.
// The request runs under ctx (a watch that is stopped cuts its query; the
// request carries ctx's values, such as an HTTP trace) and ends with the
// generation too.
func (a *agentClient) request(ctx context.Context, blocking bool, do func(ctx context.Context) error) error {
	gctx := a.gen.current()
	limit := a.cfg.ReadTimeout
	if blocking {
		limit += a.cfg.Wait + a.cfg.Wait/16
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	defer context.AfterFunc(gctx, cancel)()
	err := do(rctx)
	switch {
	case err == nil, ctx.Err() != nil:
		return err
	case gctx.Err() != nil:
		return errRenewed
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("no answer within %v: %w", limit, errTimeout)
	}
	return err
}

// statusCode returns the HTTP status of a failed request, 0 when it got
// none (connection refused, timeout, malformed answer).
func statusCode(err error) int {
	if se, ok := errors.AsType[api.StatusError](err); ok {
		return se.Code
	}
	return 0
}

// read reads one service's instances: non-blocking when index is 0 (from
// the agent cache when cached), else a blocking query that answers once
// the service's index passes index or the wait ends.
func (a *agentClient) read(ctx context.Context, c *api.Client, dc, service string, cached bool, index uint64) ([]*api.ServiceEntry, *api.QueryMeta, error) {
	var entries []*api.ServiceEntry
	var meta *api.QueryMeta
	err := a.request(ctx, index > 0, func(rctx context.Context) error {
		q := a.queryOptions(rctx, dc)
		q.UseCache = cached
		q.Filter = a.cfg.Filter
		if index > 0 {
			q.WaitIndex, q.WaitTime = index, a.cfg.Wait
		}
		var err error
		meta, err = a.boundedStale(q, func(q *api.QueryOptions) (*api.QueryMeta, error) {
			var m *api.QueryMeta
			var err error
			entries, m, err = c.Health().ServiceMultipleTags(service, a.cfg.Tags, false, q)
			return m, err
		})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading health of service %q in %s: %w", service, dc, err)
	}
	return entries, meta, nil
}

// peekFilter matches no instance: Consul gives every instance an ID (the
// service name when the registration has none).
const peekFilter = `Service.ID == ""`

// peek asks for the index of one service's health only: the health query
// with a filter that matches no instance, answered "[]" with the
// service's X-Consul-Index. It costs the agent a fraction of a read (no
// instances to encode); sweeps are made of peeks (see sweeper).
func (a *agentClient) peek(ctx context.Context, c *api.Client, dc, service string, cached bool) (*api.QueryMeta, error) {
	var meta *api.QueryMeta
	err := a.request(ctx, false, func(rctx context.Context) error {
		q := a.queryOptions(rctx, dc)
		q.UseCache, q.Filter = cached, peekFilter
		var err error
		_, meta, err = c.Health().ServiceMultipleTags(service, a.cfg.Tags, false, q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("peeking at the index of service %q in %s: %w", service, dc, err)
	}
	return meta, nil
}

// agentInfo is what the source learns from /v1/agent/self. Every field is
// empty (or 0) when unknown: a token without agent:read may not ask.
type agentInfo struct {
	datacenter string
	// nodeID identifies the agent (see agentMonitor).
	nodeID string
	// maxConnsPerClient is the agent's limits.http_max_conns_per_client
	// (DebugConfig.HTTPMaxConnsPerClient in Consul 1.14): the connections
	// it accepts from one client address; 0 when unknown.
	maxConnsPerClient int
}

// self reads /v1/agent/self with the deadline of a non-blocking read. A
// 403 (no agent:read) is not an error: the answer is then unknown.
func (a *agentClient) self(ctx context.Context, c *api.Client) (agentInfo, error) {
	var self struct {
		Config struct {
			Datacenter, NodeID string
		}
		DebugConfig struct {
			HTTPMaxConnsPerClient int
		}
	}
	err := a.request(ctx, false, func(ctx context.Context) error {
		_, err := c.Raw().Query("/v1/agent/self", &self, a.queryOptions(ctx, ""))
		return err
	})
	switch {
	case statusCode(err) == http.StatusForbidden:
		return agentInfo{}, nil
	case err != nil:
		return agentInfo{}, fmt.Errorf("reading /v1/agent/self: %w", err)
	}
	return agentInfo{datacenter: self.Config.Datacenter, nodeID: self.Config.NodeID,
		maxConnsPerClient: self.DebugConfig.HTTPMaxConnsPerClient}, nil
}

// datacenters lists the datacenters of the catalog, nearest first.
func (a *agentClient) datacenters(ctx context.Context, c *api.Client) ([]string, error) {
	var all []string
	err := a.request(ctx, false, func(ctx context.Context) error {
		_, err := c.Raw().Query("/v1/catalog/datacenters", &all, a.queryOptions(ctx, ""))
		return err
	})
	return all, err
}

// leader asks for the cluster's leader with the deadline of a
// non-blocking read.
func (a *agentClient) leader(ctx context.Context, c *api.Client, dc string) error {
	return a.request(ctx, false, func(rctx context.Context) error {
		_, err := c.Status().LeaderWithQueryOptions(a.queryOptions(rctx, dc))
		return err
	})
}
