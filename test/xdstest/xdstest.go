// Package xdstest builds xDS resources as the bridge publishes them, for
// the tests of the engine's views.
package xdstest

import (
	"time"

	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/translate"
	"github.com/xdsbridge/xdsbridge/xds"
)

// Service returns the cluster (with connect timeout, 0 for the default)
// and the assignment of a service with one healthy endpoint 127.0.0.1:port,
// built by translate like the bridge's own.
func Service(name string, port uint32, timeout time.Duration) (cluster, assignment xds.Resource) {
	r, err := translate.Service(sources.Service{Name: name, Endpoints: []sources.Endpoint{
		{Address: "127.0.0.1", Port: port, Health: sources.HealthHealthy},
	}}, translate.Options{ConnectTimeout: timeout})
	if err != nil {
		panic(err) // a fixed, valid service
	}
	return xds.Resource{Type: xds.ClusterType, Name: name, Message: r.Cluster},
		xds.Resource{Type: xds.EndpointType, Name: name, Message: r.Assignment}
}

// Cluster is the cluster of Service.
func Cluster(name string, timeout time.Duration) xds.Resource {
	c, _ := Service(name, 1, timeout)
	return c
}

// Assignment is the assignment of Service.
func Assignment(name string, port uint32) xds.Resource {
	_, a := Service(name, port, 0)
	return a
}
