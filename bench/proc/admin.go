package proc

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// BridgeReady reports whether the bridge's admin API at adminAddr says
// ready.
func BridgeReady(adminAddr string) func() bool {
	return AdminAnswers(adminAddr, "/readyz", func(code int) bool { return code == http.StatusOK })
}

// AdminAnswers reports whether a GET of path on the bridge's admin API
// answers with a status that ok accepts.
func AdminAnswers(adminAddr, path string, ok func(status int) bool) func() bool {
	return func() bool {
		resp, err := http.Get("http://" + adminAddr + path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return ok(resp.StatusCode)
	}
}

// BridgeSynced reports whether the bridge is ready with its source synced.
// Ready is not enough: past its startup timeout the bridge is ready with
// the source served empty, so the first sync ends when the source says it
// has read everything once.
func BridgeSynced(adminAddr, source string) func() bool {
	return func() bool {
		v, err := ScrapeSample("http://"+adminAddr+"/metrics", fmt.Sprintf("xdsbridge_source_synced{source=%q}", source))
		return err == nil && v == 1 && BridgeReady(adminAddr)()
	}
}

// ScrapeSample reads one sample, by its full name with labels, from the
// Prometheus text at url; 0 when it is absent (a counter not yet moved).
func ScrapeSample(url, sample string) (float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(url)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, sc.Err()
}
