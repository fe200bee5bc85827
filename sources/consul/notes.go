package consul

import (
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/xdsbridge/xdsbridge/sources"
)

// aclNotes records which answers had results hidden by ACLs
// (X-Consul-Results-Filtered-By-ACLs): a token that lost rights makes
// services and instances disappear with a 200. Each is logged once, the
// list is shown in the status ("acl_filtered"), and meanwhile the callers
// remove nothing that such an answer lacks.
type aclNotes struct {
	log      *slog.Logger
	status   *sources.Status
	filtered map[string]bool // what was read, by the reads it names
}

// mark records whether the answer about what had results hidden.
func (a *aclNotes) mark(filtered bool, what string) {
	if filtered == a.filtered[what] {
		return
	}
	if filtered {
		a.filtered[what] = true
		a.log.Warn("consul hid results from the token (ACL filtering); nothing is removed because of it", "read", what)
	} else {
		delete(a.filtered, what)
	}
	msg := ""
	if len(a.filtered) > 0 {
		names := slices.Sorted(maps.Keys(a.filtered))
		if len(names) > 10 {
			names = append(names[:10], "...")
		}
		msg = "results hidden by ACLs in: " + strings.Join(names, ", ")
	}
	a.status.Note("acl_filtered", msg)
}
