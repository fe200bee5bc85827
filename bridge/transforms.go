package bridge

import (
	"log/slog"
	"slices"

	"github.com/xdsbridge/xdsbridge/manager"
	"github.com/xdsbridge/xdsbridge/transform"
)

// transforms runs the configured transforms on the manager's changes
// (transform.Stream) and logs the services they hold back because another
// service already has the name they are renamed to, each time that set
// changes. It belongs to the publisher and runs under its lock.
type transforms struct {
	stream *transform.Stream
	log    *slog.Logger
	// conflicts are the services held back (transform.Stream.Conflicts),
	// as last logged.
	conflicts []string
}

func newTransforms(chain *transform.Chain, log *slog.Logger) *transforms {
	return &transforms{stream: transform.NewStream(chain), log: log}
}

// apply returns the changes c after the transforms.
func (t *transforms) apply(c manager.Changes) manager.Changes {
	c = t.stream.Apply(c)
	if conflicts := t.stream.Conflicts; !slices.Equal(conflicts, t.conflicts) {
		t.conflicts = conflicts
		if len(conflicts) > 0 {
			t.log.Warn("transforms renamed services to a name another service already has; not serving them until it is free",
				"services", conflicts)
		}
	}
	return c
}
