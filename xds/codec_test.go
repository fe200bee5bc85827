package xds

import (
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/xdsbridge/xdsbridge/test/envoysim"
	"github.com/xdsbridge/xdsbridge/xds/wire"
)

// TestCodecServes runs a SotW client against a server using the codec.
func TestCodecServes(t *testing.T) {
	s := NewServer(Options{})
	f := serveFixture(t, s, services(50), grpc.ForceServerCodecV2(wire.Codec()))
	c := f.client(variant{name: "sotw-codec"}, envoysim.Options{})
	f.converge(c)
	mark := len(c.Log())
	f.apply([]Resource{assignment("svc-7", 4)}, nil)
	f.converge(c)
	if got := received(c, mark, EndpointType); len(got) != 1 || len(got[0].Names) != 1 {
		t.Fatalf("after one change: %+v", got)
	}
	// The EDS name list (a shared one by now) changes both ways.
	f.apply(nil, []Key{{ClusterType, "svc-3"}, {EndpointType, "svc-3"}})
	f.converge(c)
	f.apply([]Resource{cluster("new", time.Second), assignment("new", 1)}, nil)
	f.converge(c)
	waitFor(t, func() bool { return subscribed(s, EndpointType) == 50 })
	mark = len(c.Log())
	f.apply([]Resource{assignment("svc-4", 4)}, nil)
	f.converge(c)
	if got := received(c, mark, EndpointType); len(got) != 1 || got[0].Names[0] != "svc-4" {
		t.Fatalf("after one change: %+v", got)
	}
}
