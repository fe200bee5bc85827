package consultest

import (
	"fmt"

	"github.com/xdsbridge/xdsbridge/test/promtext"
)

// Metrics reads the Prometheus-format metrics of the agent at addr
// (host:port of its HTTP API; the agent needs Telemetry) and returns each
// sample without labels by name, and each labelled sample by its full
// text ("name{labels}"). The server's consul_rpc_request counts every RPC
// it serves (each read an agent forwards), consul_rpc_query the blocking
// ones among them. It depends on no test state, so benchmarks use it too.
func Metrics(addr string) (map[string]float64, error) {
	m, err := promtext.Scrape("http://" + addr + "/v1/agent/metrics?format=prometheus")
	if err != nil {
		return nil, fmt.Errorf("reading metrics of %s: %w", addr, err)
	}
	return m, nil
}
