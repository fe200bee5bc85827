package consul

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/consul/api"
)

// agentInfo is what the source learns from /v1/agent/self. Every field is
// empty (or 0) when unknown: a token without agent:read may not ask.
type agentInfo struct {
	datacenter string
	// nodeID identifies the agent (see reset.go).
	nodeID string
	// maxConnsPerClient is the agent's limits.http_max_conns_per_client
	// (DebugConfig.HTTPMaxConnsPerClient in Consul 1.14): the connections
	// it accepts from one client address; 0 when unknown.
	maxConnsPerClient int
}

// agentSelf reads /v1/agent/self with the deadline of a non-blocking read.
// A 403 (no agent:read) is not an error: the answer is then unknown.
func (s *Source) agentSelf(ctx context.Context, c *api.Client) (agentInfo, error) {
	var self struct {
		Config struct {
			Datacenter, NodeID string
		}
		DebugConfig struct {
			HTTPMaxConnsPerClient int
		}
	}
	err := s.request(ctx, false, func(ctx context.Context) error {
		_, err := c.Raw().Query("/v1/agent/self", &self, s.queryOptions(ctx, ""))
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

// discover asks the agent about itself (see untilAnswer) and returns the
// datacenters to watch: the configured ones, else the agent's own, else
// (a token without agent:read) the nearest of the catalog.
func (s *Source) discover(ctx context.Context, c *api.Client) ([]string, agentInfo, error) {
	var info agentInfo
	var dcs []string
	err := s.untilAnswer(ctx, func(ctx context.Context) error {
		var err error
		if info, err = s.agentSelf(ctx, c); err != nil {
			return err
		}
		switch {
		case len(s.cfg.Datacenters) > 0:
			dcs = s.cfg.Datacenters
		case info.datacenter != "":
			dcs = []string{info.datacenter}
		default:
			var all []string
			err := s.request(ctx, false, func(ctx context.Context) error {
				_, err := c.Raw().Query("/v1/catalog/datacenters", &all, s.queryOptions(ctx, ""))
				return err
			})
			if err != nil {
				return fmt.Errorf("finding the agent's datacenter: %w", err)
			}
			if len(all) == 0 {
				return errors.New("finding the agent's datacenter: catalog lists none")
			}
			dcs = all[:1]
		}
		return nil
	})
	return dcs, info, err
}
