package zookeeper

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/xdsbridge/xdsbridge/sources"
)

// format is how one kind of registrar lays out its instances in the tree
// and encodes each. The parsers are pure: one znode's name and data in,
// one endpoint out, or the reason it cannot be served.
type format struct {
	// tree: the entry's path holds services, one per child, each a
	// cluster of the child's name. Otherwise the path is one service.
	tree bool
	// dir returns the znode whose children are the instances of the
	// service whose znode is svc.
	dir func(svc string) string
	// member reports whether a child of dir is an instance.
	member func(name string) bool
	// inName: the instance is all in the child's name; its data is not
	// read, and so not watched.
	inName bool
	// parse decodes one instance.
	parse func(s *Service, name string, data []byte) (sources.Endpoint, error)
}

var formats = map[string]format{
	"curator":   {tree: true, dir: same, member: everyChild, parse: parseCurator},
	"serverset": {dir: same, member: isServersetMember, parse: parseServerset},
	"nerve":     {dir: same, member: everyChild, parse: parseNerve},
	"dubbo":     {tree: true, dir: dubboProviders, member: everyChild, inName: true, parse: parseDubbo},
}

func same(p string) string   { return p }
func everyChild(string) bool { return true }
func formatNames() string    { return strings.Join(slices.Sorted(maps.Keys(formats)), ", ") }
func child(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// maxData bounds the data of one instance znode that a parser reads;
// ZooKeeper's own default bound on a znode (jute.maxbuffer) is 1 MiB, and
// no registrar writes more than a few hundred bytes.
const maxData = 64 << 10

// decodeJSON decodes one instance's JSON document strictly enough to
// tell a registrar's record from anything else.
func decodeJSON(data []byte, v any) error {
	if len(data) == 0 {
		return fmt.Errorf("no data")
	}
	if len(data) > maxData {
		return fmt.Errorf("data of %d bytes exceeds %d", len(data), maxData)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("not the registrar's JSON: %w", err)
	}
	return nil
}

// port checks a port number as the registrars write it.
func port(n int64) (uint32, error) {
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %d is outside 1..65535", n)
	}
	return uint32(n), nil
}

// scalarMeta copies the scalar members of a JSON object into meta under
// prefix; nested objects and arrays are left out, and so is Jackson's
// type tag.
func scalarMeta(meta map[string]string, prefix string, obj map[string]json.RawMessage) {
	for k, raw := range obj {
		if k == "@class" || len(raw) == 0 {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		switch v := v.(type) {
		case string:
			meta[prefix+k] = v
		case float64:
			meta[prefix+k] = strconv.FormatFloat(v, 'f', -1, 64)
		case bool:
			meta[prefix+k] = strconv.FormatBool(v)
		}
	}
}
