//go:build !no_etcd

package plugins

// The etcd source: gRPC naming, SkyDNS and JSON instance keys, watched.
import _ "github.com/xdsbridge/xdsbridge/sources/etcd"
