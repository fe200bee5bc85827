package statedir

import "fmt"

// format1 is the first format. Its records had no json tags of their own:
// the file held the model's Go field names and Health as a number. It is
// still read, so that a bridge upgraded from a version that wrote it keeps
// its warm start; the next save writes the current format.
const format1 = "xdsbridge-state/1"

// The records of format 1, frozen: they spell out what that writer
// produced (the model as it was, encoded with its Go field names), so that
// a later change to the model does not change how such a file is read.
type (
	source1 struct {
		Name        string     `json:"name"`
		Fingerprint string     `json:"fingerprint"`
		Services    []service1 `json:"services"`
	}
	service1 struct {
		Name       string            `json:"Name"`
		Endpoints  []endpoint1       `json:"Endpoints"`
		Source     string            `json:"Source"`
		Localities []localityWeight1 `json:"Localities"`
	}
	endpoint1 struct {
		Address  string            `json:"Address"`
		Port     uint32            `json:"Port"`
		Weight   uint32            `json:"Weight"`
		Priority uint32            `json:"Priority"`
		Health   uint8             `json:"Health"`
		Locality locality1         `json:"Locality"`
		Metadata map[string]string `json:"Metadata"`
		Origin   origin1           `json:"Origin"`
	}
	locality1 struct {
		Region  string `json:"Region"`
		Zone    string `json:"Zone"`
		SubZone string `json:"SubZone"`
	}
	localityWeight1 struct {
		Priority uint32    `json:"Priority"`
		Locality locality1 `json:"Locality"`
		Weight   uint32    `json:"Weight"`
	}
	origin1 struct {
		Source     string   `json:"Source"`
		Record     string   `json:"Record"`
		Transforms []string `json:"Transforms"`
	}
)

// health1 names the health numbers format 1 wrote, in the order the
// model's constants had then. A number outside them keeps a name no
// health has, so that services rejects its source as for any file.
func health1(h uint8) string {
	names := [...]string{"unknown", "healthy", "unhealthy", "degraded", "draining"}
	if int(h) < len(names) {
		return names[h]
	}
	return fmt.Sprintf("health(%d)", h)
}

// upgrade1 converts format 1 records to the current ones, which services
// then converts to the model as it converts any file.
func upgrade1(old []source1) []sourceRecord {
	out := make([]sourceRecord, 0, len(old))
	for _, src := range old {
		rec := sourceRecord{Name: src.Name, Fingerprint: src.Fingerprint, Services: make([]serviceRecord, 0, len(src.Services))}
		for _, s := range src.Services {
			svc := serviceRecord{Name: s.Name, Source: s.Source, Endpoints: make([]endpointRecord, 0, len(s.Endpoints))}
			for _, e := range s.Endpoints {
				svc.Endpoints = append(svc.Endpoints, endpointRecord{
					Address: e.Address, Port: e.Port, Weight: e.Weight, Priority: e.Priority, Health: health1(e.Health),
					Locality: e.Locality.upgrade(), Metadata: e.Metadata,
					Origin: originRecord{Source: e.Origin.Source, Record: e.Origin.Record, Transforms: e.Origin.Transforms},
				})
			}
			// Format 1 wrote no locality weights as null, which decodes
			// to nil here, and an empty list as [].
			if s.Localities != nil {
				lw := make([]localityWeightRecord, 0, len(s.Localities))
				for _, l := range s.Localities {
					lw = append(lw, localityWeightRecord{Priority: l.Priority, Locality: l.Locality.upgrade(), Weight: l.Weight})
				}
				svc.Localities = &lw
			}
			rec.Services = append(rec.Services, svc)
		}
		out = append(out, rec)
	}
	return out
}

func (l locality1) upgrade() localityRecord { return localityRecord(l) }
