package etcd

import (
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/sources/file"
)

// jsonEndpoint reads one instance in the file source's endpoint schema,
// with its parser, so that the two cannot drift apart: strict, an unknown
// field or a value of the wrong kind rejects the key.
func jsonEndpoint(value []byte) (sources.Endpoint, error) {
	return file.ParseEndpoint(value)
}
