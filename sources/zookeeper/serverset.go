package zookeeper

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/xdsbridge/xdsbridge/sources"
)

// serversetMember is a Finagle/Aurora serverset member: the JSON of
// Twitter's ServiceInstance thrift struct that Finagle's ZkAnnouncer and
// Aurora's executor write into the `member_` ephemeral sequential znodes
// of a serverset path.
type serversetMember struct {
	ServiceEndpoint     *serversetEndpoint           `json:"serviceEndpoint"`
	AdditionalEndpoints map[string]serversetEndpoint `json:"additionalEndpoints"`
	Status              string                       `json:"status"`
	Shard               *int64                       `json:"shard"`
}

type serversetEndpoint struct {
	Host string `json:"host"`
	Port int64  `json:"port"`
}

// serversetMemberPrefix is how the announcers name member znodes; other
// children of a serverset path (locks, leader election) are not
// instances.
const serversetMemberPrefix = "member_"

func isServersetMember(name string) bool { return strings.HasPrefix(name, serversetMemberPrefix) }

// serversetHealth maps the member status (Twitter's Status enum) onto the
// model: ALIVE serves, WARNING is degraded, STOPPING drains, the rest do
// not serve.
var serversetHealth = map[string]sources.Health{
	"ALIVE": sources.HealthHealthy, "WARNING": sources.HealthDegraded, "STOPPING": sources.HealthDraining,
	"STARTING": sources.HealthUnhealthy, "STOPPED": sources.HealthUnhealthy, "DEAD": sources.HealthUnhealthy,
}

// parseServerset reads one member: its serviceEndpoint, or the additional
// endpoint the entry names; status and shard become metadata too.
func parseServerset(s *Service, _ string, data []byte) (sources.Endpoint, error) {
	var m serversetMember
	if err := decodeJSON(data, &m); err != nil {
		return sources.Endpoint{}, err
	}
	ep := m.ServiceEndpoint
	if s.Endpoint != "" {
		e, ok := m.AdditionalEndpoints[s.Endpoint]
		if !ok {
			return sources.Endpoint{}, fmt.Errorf("no additional endpoint %q", s.Endpoint)
		}
		ep = &e
	}
	if ep == nil {
		return sources.Endpoint{}, fmt.Errorf("no serviceEndpoint")
	}
	pn, err := port(ep.Port)
	if err != nil {
		return sources.Endpoint{}, err
	}
	status := m.Status
	if status == "" {
		status = "ALIVE" // what Finagle announces; Aurora always writes it
	}
	h, ok := serversetHealth[status]
	if !ok {
		return sources.Endpoint{}, fmt.Errorf("unknown status %q", m.Status)
	}
	meta := map[string]string{"status": status}
	if m.Shard != nil {
		meta["shard"] = strconv.FormatInt(*m.Shard, 10)
	}
	return sources.Endpoint{Address: ep.Host, Port: pn, Health: h, Metadata: meta}, nil
}
