package zookeeper

import (
	"fmt"

	"github.com/xdsbridge/xdsbridge/sources"
)

// nerveInstance is what Airbnb's Nerve writes into each ephemeral znode
// under a service's zk_path (its ZookeeperReporter), and what Synapse's
// zookeeper watcher reads: host, port and name, with weight,
// haproxy_server_options and labels when configured.
type nerveInstance struct {
	Host   string            `json:"host"`
	Port   int64             `json:"port"`
	Name   string            `json:"name"`
	Weight *int64            `json:"weight"`
	Labels map[string]string `json:"labels"`
}

// parseNerve reads one Nerve registration: the weight becomes the
// endpoint's, the name and labels (label.<key>) metadata.
func parseNerve(_ *Service, _ string, data []byte) (sources.Endpoint, error) {
	var in nerveInstance
	if err := decodeJSON(data, &in); err != nil {
		return sources.Endpoint{}, err
	}
	pn, err := port(in.Port)
	if err != nil {
		return sources.Endpoint{}, err
	}
	e := sources.Endpoint{Address: in.Host, Port: pn, Health: sources.HealthHealthy, Metadata: map[string]string{}}
	if in.Name != "" {
		e.Metadata["name"] = in.Name
	}
	if in.Weight != nil {
		if *in.Weight < 0 || *in.Weight > 1<<24 {
			return sources.Endpoint{}, fmt.Errorf("weight %d is outside 0..%d", *in.Weight, 1<<24)
		}
		e.Weight = uint32(*in.Weight)
	}
	for k, v := range in.Labels {
		e.Metadata["label."+k] = v
	}
	return e, nil
}
