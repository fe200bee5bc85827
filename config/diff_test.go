package config

import (
	"slices"
	"testing"
)

func TestChanged(t *testing.T) {
	const base = "sources: [{name: a, type: fake, path: x}]\n"
	tests := []struct {
		name, a, b string
		want       []string
	}{
		{"nothing", base, base, nil},
		{"a scalar", base + "admin: {listen: 127.0.0.1:9}\n", base + "admin: {listen: 127.0.0.1:8}\n", []string{"admin.listen"}},
		{"a default made explicit", base, base + "log: {level: info}\n", nil},
		{"nested", base + "xds: {keepalive: {time: 10s}}\n", base + "xds: {keepalive: {time: 20s}}\nlog: {level: debug}\n",
			[]string{"xds.keepalive.time", "log.level"}},
		{"a source setting", base, "sources: [{name: a, type: fake, path: y}]\n", []string{"sources[0].path"}},
		{"a list's length", base, base + "outputs: [{type: files, dir: /tmp/out}]\n", []string{"outputs"}},
		{"the watch", base, base + "reload: {watch_config: true}\n", []string{"reload.watch_config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := parse([]byte(tt.a), "/d", nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := parse([]byte(tt.b), "/d", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := Changed(a, b); !slices.Equal(got, tt.want) {
				t.Errorf("Changed = %q, want %q", got, tt.want)
			}
		})
	}
}
