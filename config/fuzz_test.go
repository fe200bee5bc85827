package config

import (
	"errors"
	"testing"

	"github.com/xdsbridge/xdsbridge/settings"
)

// FuzzParse feeds arbitrary files to the configuration loader: it must
// never panic, every error a user can fix must name a key, and an accepted
// configuration must validate again unchanged.
//
// `make fuzz` (part of `make test`) runs it with the other fuzz targets;
// to run it alone:
//
//	go test -run='^$' -fuzz='^FuzzParse$' -fuzztime=10s ./config/
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		minimal,
		"xds: {listen: '[::1]:1', keepalive: {time: 1s}}\nguard: {hold: 5s}\nstate_dir: s\n" + minimal,
		"sources: [{name: a, type: fake, path: p, startup: {timeout: 1s, required: true}, guard: {enabled: false}}]",
		"sources:\n  - name: a\n    type: fake\n    path: p\n    guard: {max_removed_fraction: 0.9, hold: 1h}\n",
		"holdoff: {min: 1ms, max: 1h}\nlog: {level: debug, format: json}\n" + minimal,
		"{\"sources\": [{\"name\": \"a\", \"type\": \"fake\", \"path\": \"p\", \"limit\": 3}]}",
		"sources: [&a {name: x, type: fake, path: *a}]",
		"sources: {name: a}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parse(data, "/d", nil)
		if err != nil {
			var ke *settings.KeyError
			if errors.As(err, &ke) && ke.Key == "" && ke.Err == nil {
				t.Fatalf("key error without key or cause: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted configuration fails validation again: %v", err)
		}
		for _, e := range cfg.Entries {
			if e.Name == "" || e.Type == "" || e.Startup.Timeout <= 0 {
				t.Fatalf("accepted entry %+v", e)
			}
		}
	})
}
