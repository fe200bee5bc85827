package file

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// servicesYAML is a services file of n services with 10 endpoints each, the
// shape of the file-source cost measurement in docs/benchmarks.md.
func servicesYAML(n int) []byte {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: svc-%d\n    endpoints:\n", i)
		for j := range 10 {
			fmt.Fprintf(&b, "      - {address: 10.%d.%d.%d, port: %d, weight: 1, locality: {region: eu, zone: eu-1a}}\n", i>>8&255, i&255, j, 8000+j)
		}
	}
	return []byte(b.String())
}

// BenchmarkParse is the decode cost of one edit of a file of N services:
// the whole file is parsed again.
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		data := servicesYAML(n)
		b.Run(fmt.Sprintf("yaml/N=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Parse(data, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEdit is the decode cost of a one-line edit with the item cache:
// one service of N changes between two loads.
func BenchmarkEdit(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		data := servicesYAML(n)
		edited := bytes.Replace(data, []byte("port: 8003,"), []byte("port: 9003,"), 1)
		b.Run(fmt.Sprintf("yaml/N=%d", n), func(b *testing.B) {
			var c itemCache
			if _, _, err := c.parse(data, false); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				in := data
				if i%2 == 0 {
					in = edited
				}
				if _, _, err := c.parse(in, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
