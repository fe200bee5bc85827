package manager

import (
	"log/slog"
	"slices"
	"time"
)

// changeLog writes one INFO line per source for the changes applied to the
// merged state (after the guard), so that an edit of a services file or a
// deregistration is visible at the default log level. Under churn a line
// per change would drown the log, so a source gets at most one line per
// changeLogEvery: what comes sooner is counted and summed up in the next
// line. The manager's loop owns it.
type changeLog struct {
	log      *slog.Logger
	bySource map[string]*changeTally
}

// changeLogEvery is the shortest time between two change lines of a
// source.
const changeLogEvery = 5 * time.Second

// changeNames is how many service names a line shows.
const changeNames = 5

// changeTally is what a source changed since its last line. The counts
// are changes, not distinct services: a service changed twice counts two.
type changeTally struct {
	added, changed, removed int
	updates                 int      // the updates these came in
	names                   []string // the first few, marked +, ~ or -
	due                     time.Time
	last                    time.Time // when the last line was written
	touched                 bool      // the current update changed something
}

func newChangeLog(log *slog.Logger) *changeLog {
	return &changeLog{log: log, bySource: map[string]*changeTally{}}
}

// note records that the update being applied for source added ('+'),
// changed ('~') or removed ('-') the service name.
func (c *changeLog) note(source string, mark byte, name string) {
	t := c.bySource[source]
	if t == nil {
		t = &changeTally{}
		c.bySource[source] = t
	}
	switch mark {
	case '+':
		t.added++
	case '~':
		t.changed++
	default:
		t.removed++
	}
	t.touched = true
	if n := string(mark) + name; len(t.names) < changeNames && !slices.Contains(t.names, n) {
		t.names = append(t.names, n)
	}
}

// flush closes the update being applied and writes the lines due at now.
func (c *changeLog) flush(now time.Time) {
	for source, t := range c.bySource {
		if t.touched {
			t.touched = false
			t.updates++
			if t.due.IsZero() {
				t.due = now
				if next := t.last.Add(changeLogEvery); next.After(now) {
					t.due = next
				}
			}
		}
		if t.due.IsZero() {
			if now.Sub(t.last) > changeLogEvery {
				delete(c.bySource, source) // quiet: the next change is logged at once
			}
			continue
		}
		if now.Before(t.due) {
			continue
		}
		c.log.Info("source changes applied", "source", source, "added", t.added, "changed", t.changed,
			"removed", t.removed, "services", t.names, "updates", t.updates)
		*t = changeTally{last: now}
	}
}

// next returns when the next line is due, or the zero time.
func (c *changeLog) next() time.Time {
	var next time.Time
	for _, t := range c.bySource {
		if !t.due.IsZero() && (next.IsZero() || t.due.Before(next)) {
			next = t.due
		}
	}
	return next
}
