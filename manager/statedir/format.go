package statedir

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/xdsbridge/xdsbridge/sources"
)

// The records below are the file format: their json tags, not the field
// names of the model, are what the file holds, so that a change to the
// model cannot change the file unnoticed. A change to these records is a
// new format: a new Format, a reader for the previous one (readers), and
// its own testdata file.
//
// Optional fields are left out when zero, which keeps a file of many
// endpoints small; a reader takes a missing field as its zero value.

// sourceRecord is the persisted state of one configured source.
type sourceRecord struct {
	Name string `json:"name"`
	// Fingerprint identifies the source's configuration when it was
	// written (see Fingerprint).
	Fingerprint string          `json:"fingerprint"`
	Services    []serviceRecord `json:"services"`
}

type serviceRecord struct {
	Name      string           `json:"name"`
	Source    string           `json:"source,omitempty"`
	Endpoints []endpointRecord `json:"endpoints"`
	// Localities is a pointer so that no locality weights (nil, the
	// sources' default) and an empty list of them stay distinct, as
	// sources.Service.Equal distinguishes them.
	Localities *[]localityWeightRecord `json:"localities,omitempty"`
}

type endpointRecord struct {
	Address  string `json:"address"`
	Port     uint32 `json:"port"`
	Weight   uint32 `json:"weight,omitempty"`
	Priority uint32 `json:"priority,omitempty"`
	// Health is the name of the health state (sources.Health.String), not
	// its number, so that the file does not depend on the order of the
	// model's constants.
	Health   string            `json:"health"`
	Locality localityRecord    `json:"locality,omitzero"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Origin   originRecord      `json:"origin,omitzero"`
}

type localityRecord struct {
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	SubZone string `json:"sub_zone,omitempty"`
}

type localityWeightRecord struct {
	Priority uint32         `json:"priority,omitempty"`
	Locality localityRecord `json:"locality,omitzero"`
	Weight   uint32         `json:"weight"`
}

type originRecord struct {
	Source     string   `json:"source,omitempty"`
	Record     string   `json:"record,omitempty"`
	Transforms []string `json:"transforms,omitempty"`
}

// records converts the state of every source to the records of the file,
// sorted by source, then service name, so that equal states give equal
// files.
func records(state map[string][]sources.Service, fingerprints map[string]string) []sourceRecord {
	out := make([]sourceRecord, 0, len(state))
	for name, svcs := range state {
		rec := sourceRecord{Name: name, Fingerprint: fingerprints[name], Services: make([]serviceRecord, 0, len(svcs))}
		for _, svc := range svcs {
			rec.Services = append(rec.Services, serviceToRecord(svc))
		}
		slices.SortFunc(rec.Services, func(a, b serviceRecord) int { return cmp.Compare(a.Name, b.Name) })
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b sourceRecord) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func serviceToRecord(svc sources.Service) serviceRecord {
	r := serviceRecord{Name: svc.Name, Source: svc.Source, Endpoints: make([]endpointRecord, 0, len(svc.Endpoints))}
	for _, e := range svc.Endpoints {
		r.Endpoints = append(r.Endpoints, endpointRecord{
			Address: e.Address, Port: e.Port, Weight: e.Weight, Priority: e.Priority, Health: e.Health.String(),
			Locality: localityToRecord(e.Locality), Metadata: e.Metadata,
			Origin: originRecord{Source: e.Origin.Source, Record: e.Origin.Record, Transforms: e.Origin.Transforms},
		})
	}
	if svc.Localities != nil {
		lw := make([]localityWeightRecord, 0, len(svc.Localities))
		for _, l := range svc.Localities {
			lw = append(lw, localityWeightRecord{Priority: l.Priority, Locality: localityToRecord(l.Locality), Weight: l.Weight})
		}
		r.Localities = &lw
	}
	return r
}

func localityToRecord(l sources.Locality) localityRecord {
	return localityRecord{Region: l.Region, Zone: l.Zone, SubZone: l.SubZone}
}

// services converts the records of one source back to the model. A record
// that cannot be a service of the model (an unknown health name) fails
// the whole source: its state is used whole or not at all.
func services(recs []serviceRecord) ([]sources.Service, error) {
	out := make([]sources.Service, 0, len(recs))
	for _, r := range recs {
		svc := sources.Service{Name: r.Name, Source: r.Source, Endpoints: make([]sources.Endpoint, 0, len(r.Endpoints))}
		for _, e := range r.Endpoints {
			health, err := sources.ParseHealth(e.Health)
			if err != nil {
				return nil, fmt.Errorf("service %s: %w", r.Name, err)
			}
			svc.Endpoints = append(svc.Endpoints, sources.Endpoint{
				Address: e.Address, Port: e.Port, Weight: e.Weight, Priority: e.Priority, Health: health,
				Locality: e.Locality.model(), Metadata: e.Metadata,
				Origin: sources.Origin{Source: e.Origin.Source, Record: e.Origin.Record, Transforms: e.Origin.Transforms},
			})
		}
		if r.Localities != nil {
			svc.Localities = make([]sources.LocalityWeight, 0, len(*r.Localities))
			for _, l := range *r.Localities {
				svc.Localities = append(svc.Localities, sources.LocalityWeight{Priority: l.Priority, Locality: l.Locality.model(), Weight: l.Weight})
			}
		}
		out = append(out, svc)
	}
	return out, nil
}

func (l localityRecord) model() sources.Locality {
	return sources.Locality{Region: l.Region, Zone: l.Zone, SubZone: l.SubZone}
}
