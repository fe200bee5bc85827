package zookeeper

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/xdsbridge/xdsbridge/sources"
)

// curatorInstance is Apache Curator's ServiceInstance as its
// JsonInstanceSerializer writes it at /<base>/<service>/<id>
// (https://curator.apache.org/docs/service-discovery): Jackson's names
// for the class's fields. Port and sslPort are null when unset; enabled is
// absent in what Curator before 4.0 wrote.
type curatorInstance struct {
	Name                string          `json:"name"`
	ID                  string          `json:"id"`
	Address             string          `json:"address"`
	Port                *int64          `json:"port"`
	SSLPort             *int64          `json:"sslPort"`
	Payload             json.RawMessage `json:"payload"`
	RegistrationTimeUTC int64           `json:"registrationTimeUTC"`
	ServiceType         string          `json:"serviceType"`
	URISpec             json.RawMessage `json:"uriSpec"`
	Enabled             *bool           `json:"enabled"`
}

// parseCurator reads one Curator ServiceInstance: the plain port, or the
// SSL port where it has none; the other one, the id and the payload's
// scalar fields (payload.<field>) become metadata. An instance disabled
// with enabled: false is served draining.
func parseCurator(_ *Service, name string, data []byte) (sources.Endpoint, error) {
	var in curatorInstance
	if err := decodeJSON(data, &in); err != nil {
		return sources.Endpoint{}, err
	}
	meta := map[string]string{"id": in.ID}
	if in.ID == "" {
		meta["id"] = name
	}
	var p *int64
	switch {
	case in.Port != nil:
		p = in.Port
		if in.SSLPort != nil {
			meta["ssl_port"] = strconv.FormatInt(*in.SSLPort, 10)
		}
	case in.SSLPort != nil:
		p = in.SSLPort
		meta["tls"] = "true"
	default:
		return sources.Endpoint{}, errors.New("neither port nor sslPort is set")
	}
	pn, err := port(*p)
	if err != nil {
		return sources.Endpoint{}, err
	}
	var payload map[string]json.RawMessage
	if len(in.Payload) > 0 && json.Unmarshal(in.Payload, &payload) == nil {
		scalarMeta(meta, "payload.", payload)
	}
	h := sources.HealthHealthy
	if in.Enabled != nil && !*in.Enabled {
		h = sources.HealthDraining
	}
	return sources.Endpoint{Address: in.Address, Port: pn, Health: h, Metadata: meta}, nil
}
