package consul

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/consul/api"
)

// errNoLeader is the failure recorded while answers say
// X-Consul-KnownLeader: false: they may be old, and the source says so.
var errNoLeader = errors.New("consul answers without a known leader (X-Consul-KnownLeader: false)")

// noteLeader records whether an answer came with a known leader.
func (l *loop) noteLeader(meta *api.QueryMeta) {
	switch {
	case meta == nil:
	case !meta.KnownLeader:
		if !l.leaderless {
			l.leaderless = true
			l.fail(errNoLeader)
		}
	case l.leaderless:
		l.leaderless = false
	}
}

// noteACLFiltered records whether an answer about what had results hidden
// by ACLs (X-Consul-Results-Filtered-By-ACLs): a token that lost rights
// makes services and instances disappear with a 200. Each is logged once,
// the list is shown in the status, and meanwhile the callers remove
// nothing that such an answer lacks.
func (l *loop) noteACLFiltered(filtered bool, what string) {
	if filtered == l.aclFiltered[what] {
		return
	}
	if filtered {
		l.aclFiltered[what] = true
		l.s.log.Warn("consul hid results from the token (ACL filtering); nothing is removed because of it", "read", what)
	} else {
		delete(l.aclFiltered, what)
	}
	msg := ""
	if len(l.aclFiltered) > 0 {
		names := slices.Sorted(maps.Keys(l.aclFiltered))
		if len(names) > 10 {
			names = append(names[:10], "...")
		}
		msg = "results hidden by ACLs in: " + strings.Join(names, ", ")
	}
	l.s.status.Note("acl_filtered", msg)
}

// noteDropped logs instances that cannot be served: those with a host name
// instead of an IP once per service at info (they are a choice of the
// registrant, such as ESM external services or synced cloud load
// balancers, and EDS needs IPs), the others at debug.
func (l *loop) noteDropped(st *svcState, dropped, hostnames int) {
	k, d := st.key, l.dcs[st.key.dc]
	if hostnames > 0 && !st.hostLogged {
		st.hostLogged = true
		l.s.log.Info("instances with a host name instead of an IP address are not served (EDS needs IPs)",
			"service", k.name, "datacenter", d.name, "instances", hostnames)
	}
	if dropped > hostnames {
		l.s.log.Debug("dropped instances that cannot be served", "service", k.name, "datacenter", d.name, "dropped", dropped-hostnames)
	}
}
