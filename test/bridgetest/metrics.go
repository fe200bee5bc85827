package bridgetest

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Scrape is one answer of a bridge's /metrics, in Prometheus' text format.
type Scrape struct {
	// Types maps every metric family's name to its type (counter, gauge,
	// histogram, ...), as its "# TYPE" line declares it.
	Types map[string]string
	// Values maps each series, written as the format writes it
	// (name{label="value",...}, labels in name order), to its value.
	Values map[string]float64
}

// ScrapeMetrics GETs url (a /metrics address) with token as the bearer
// token ("" for none) and parses the answer, failing the test if it is not
// a 200 in the text format.
func ScrapeMetrics(t testing.TB, url, token string) Scrape {
	t.Helper()
	code, body := GetAuth(url, token)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %q", url, code, body)
	}
	s := Scrape{Types: map[string]string{}, Values: map[string]float64{}}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			s.Types[name] = typ
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("%s: unparsable line %q", url, line)
		}
		s.Values[line[:i]] = v
	}
	return s
}

// Family returns the series of the metric family name (for a histogram
// or summary, its _bucket, _sum and _count series too).
func (s Scrape) Family(name string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range s.Values {
		base, _, _ := strings.Cut(series, "{")
		if base == name || s.Types[name] == "histogram" && strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(base, "_bucket"), "_sum"), "_count") == name {
			out[series] = v
		}
	}
	return out
}
