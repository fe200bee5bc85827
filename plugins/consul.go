//go:build !no_consul

package plugins

// The Consul source: catalog and health watches through blocking queries.
import _ "github.com/xdsbridge/xdsbridge/sources/consul"
