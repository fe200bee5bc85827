package etcd

import (
	"fmt"
	"slices"
	"testing"

	"github.com/xdsbridge/xdsbridge/test/etcdtest"
)

// FormatNames and FormatPrefix name the formats driveFormat covers and
// where their registrars write, for the bridge's tests.
var FormatNames = func() []string {
	var names []string
	for _, f := range fixtures {
		names = append(names, f.format)
	}
	return names
}()

func FormatPrefix(format string) string { return fixtureOf(format).prefix }

// FormatClusters names the clusters DriveFormat serves under format.
func FormatClusters(format string) []string {
	f := fixtureOf(format)
	return []string{f.cluster("web"), f.cluster("api")}
}

func fixtureOf(format string) fixture {
	for _, f := range fixtures {
		if f.format == format {
			return f
		}
	}
	panic("no fixture of format " + format)
}

// DriveFormat runs driveFormat for the bridge's tests: check gets, per
// cluster, each endpoint as "addr:port/weight/priority" (sorted), nil for a
// cluster removed.
func DriveFormat(t *testing.T, reg etcdtest.Registrar, format string, start func(), check func(step string, want map[string][]string)) {
	t.Helper()
	driveFormat(t, reg, fixtureOf(format), start, func(step string, want served) {
		out := map[string][]string{}
		for name, insts := range want {
			if insts == nil {
				out[name] = nil
				continue
			}
			eps := []string{}
			for _, in := range insts {
				eps = append(eps, fmt.Sprintf("%s:%d/%d/%d", in.addr, in.port, in.weight, in.priority))
			}
			slices.Sort(eps)
			out[name] = eps
		}
		check(step, out)
	})
}
