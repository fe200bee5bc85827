package file

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/xdsbridge/xdsbridge/sources"
)

// BenchmarkLoadEdit is one edit as the source sees it at 100,000 services:
// the file read, compared with the last and split, the edited item parsed.
func BenchmarkLoadEdit(b *testing.B) {
	data := servicesYAML(100000)
	edited := bytes.Replace(data, []byte("port: 8003,"), []byte("port: 9003,"), 1)
	path := filepath.Join(b.TempDir(), "services.yaml")
	s := newSource(Config{Path: path}, sources.Options{})
	s.maxBytes = 1 << 30
	var r reader
	write := func(d []byte) {
		if err := os.WriteFile(path, d, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write(data)
	if _, ok, _, _ := s.load(&r, 0); !ok {
		b.Fatal("first load")
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		in := data
		if i%2 == 0 {
			in = edited
		}
		write(in)
		b.StartTimer()
		if _, ok, _, _ := s.load(&r, 0); !ok {
			b.Fatal("edit not loaded")
		}
	}
}
