package consultest

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Metrics reads the Prometheus-format metrics of the agent at addr
// (host:port of its HTTP API; the agent needs Telemetry) and returns each
// sample without labels by name, and each labelled sample by its full
// text ("name{labels}"). The server's consul_rpc_request counts every RPC
// it serves (each read an agent forwards), consul_rpc_query the blocking
// ones among them. It depends on no test state, so benchmarks use it too.
func Metrics(addr string) (map[string]float64, error) {
	// No connection is kept: a scrape now and then needs none, and an
	// idle one would outlive the caller's goroutine-leak checks.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + "/v1/agent/metrics?format=prometheus")
	if err != nil {
		return nil, fmt.Errorf("reading metrics of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading metrics of %s: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] += v
	}
	return out, sc.Err()
}
