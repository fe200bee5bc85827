//go:build !no_zookeeper

package plugins

// The ZooKeeper source: Curator, serverset, Nerve and Dubbo registrations,
// watched.
import _ "github.com/xdsbridge/xdsbridge/sources/zookeeper"
