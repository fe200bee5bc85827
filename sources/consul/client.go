package consul

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
)

// newClient builds the API client. Its transport allows at most
// cfg.MaxConnections connections to the agent and keeps as many idle, so
// that connections are reused rather than churned (a closed connection
// lingers in TIME_WAIT and still counts against some limits).
func (s *Source) newClient() (*api.Client, *http.Transport, error) {
	cfg := s.cfg
	token := cfg.Token
	if cfg.TokenFile != "" {
		b, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("reading token_file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:           http.ProxyFromEnvironment,
		DialContext:     dialer.DialContext,
		MaxConnsPerHost: cfg.MaxConnections,
		// Over HTTPS, HTTP/2 carries every query as a stream of one
		// connection (the agent's HTTPS listener speaks h2).
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          cfg.MaxConnections,
		MaxIdleConnsPerHost:   cfg.MaxConnections,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// A blocking query answers after up to wait + wait/16; headers of
		// any other request come fast. No ResponseHeaderTimeout: the
		// context of each request bounds it instead.
	}
	if s.dial != nil {
		tr.DialContext = s.dial
	}
	tlsCfg, err := api.SetupTLSConfig(&api.TLSConfig{
		Address:            cfg.TLS.ServerName,
		CAFile:             cfg.TLS.CAFile,
		CertFile:           cfg.TLS.CertFile,
		KeyFile:            cfg.TLS.KeyFile,
		InsecureSkipVerify: cfg.TLS.InsecureSkipVerify,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("setting up tls: %w", err)
	}
	tr.TLSClientConfig = tlsCfg
	var rt http.RoundTripper = tr
	if s.wrap != nil {
		rt = s.wrap(rt)
	}
	c, err := api.NewClient(&api.Config{
		Address:    cfg.Address,
		Scheme:     cfg.Scheme,
		Token:      token,
		Namespace:  cfg.Namespace,
		Partition:  cfg.Partition,
		Transport:  tr,
		HttpClient: &http.Client{Transport: rt},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating consul client: %w", err)
	}
	return c, tr, nil
}

// queryOptions are the options common to every read in datacenter dc.
func (s *Source) queryOptions(ctx context.Context, dc string) *api.QueryOptions {
	q := &api.QueryOptions{
		Datacenter: dc,
		Namespace:  s.cfg.Namespace,
		Partition:  s.cfg.Partition,
		AllowStale: *s.cfg.Stale,
		NodeMeta:   s.cfg.NodeMeta,
	}
	return q.WithContext(ctx)
}

// agentDatacenter asks the agent for its datacenter; with a token lacking
// agent:read it falls back to the nearest datacenter of the catalog.
func agentDatacenter(c *api.Client) (string, error) {
	self, err := c.Agent().Self()
	if err == nil {
		if dc, ok := self["Config"]["Datacenter"].(string); ok && dc != "" {
			return dc, nil
		}
	}
	dcs, err2 := c.Catalog().Datacenters()
	if err2 != nil {
		return "", fmt.Errorf("finding the agent's datacenter: %w", errors.Join(err, err2))
	}
	if len(dcs) == 0 {
		return "", errors.New("finding the agent's datacenter: catalog lists none")
	}
	return dcs[0], nil
}
