// Package promtext reads the metrics a server exposes in Prometheus' text
// format, for tests and benchmarks that measure what the bridge costs a
// registry (requests served, watches held, bytes sent).
package promtext

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scrape GETs url and returns each sample without labels by name, and
// each labelled sample by its full text ("name{labels}"), as the server
// writes it. It keeps no connection: a scrape now and then needs none,
// and an idle one would outlive the caller's goroutine-leak checks.
func Scrape(url string) (map[string]float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(url)
	if err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading metrics at %s: %s", url, resp.Status)
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
