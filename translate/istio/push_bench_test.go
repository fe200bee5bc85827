package istio

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/xdsbridge/xdsbridge/test/grpcxdstest"
	"github.com/xdsbridge/xdsbridge/test/istiodsim"
	"github.com/xdsbridge/xdsbridge/xds"
)

// What a full push to istiod costs through the serving engine, in each
// shape, at 10,000 services of 3 instances:
//
//	go test -run '^$' -bench ServedPush -benchtime 20x ./translate/istio/
//
// The resources are served as the bridge serves them (every kind under
// both type URLs, xds.Options.Collections) over gRPC on loopback to an
// istiod-like client (test/istiodsim, Light: it ACKs and counts bytes
// without decoding the resources). Each op changes the weight of one
// instance of the next service (an update of its ServiceEntry, or of its
// WorkloadEntry), translates that service, applies its resources and waits
// until the client has the response. ns/op is that
// whole push (translation, Apply, the response written from the shared
// encoded records, the client's receipt); push-B the response's size, the
// whole collection that carries the endpoints. marshal-ns is what proto.Marshal
// of that response takes, the encoding a server that does not share
// encoded records would repeat for every istiod per push.
func BenchmarkServedPush(b *testing.B) {
	for _, shape := range []Shape{ShapeInline, ShapeWorkloadEntries} {
		for _, meta := range []string{"bare", "consul"} {
			b.Run(fmt.Sprintf("%s/%s", shape, meta), func(b *testing.B) { benchServedPush(b, shape, meta) })
		}
	}
}

func benchServedPush(b *testing.B, shape Shape, meta string) {
	b.Helper()
	fleet := benchFleet(benchMeta[meta])
	tr := translator(b, Options{Shape: shape})
	var urls []string
	for _, k := range []Kind{ServiceEntry, WorkloadEntry} {
		urls = append(urls, k.TypeURLs()...)
	}
	srv := xds.NewServer(xds.Options{Collections: urls})
	var ups []xds.Resource
	for _, svc := range fleet {
		ups = append(ups, served(translated(b, tr, svc))...)
	}
	srv.Apply(ups, nil)
	addr := grpcxdstest.Serve(b, srv.Register, append(srv.GRPCOptions(), grpc.ForceServerCodecV2(xds.Codec()))...)

	kind := ServiceEntry
	if shape == ShapeWorkloadEntries {
		kind = WorkloadEntry // the collection an endpoint change re-sends
	}
	url := kind.TypeURLs()[0]
	istiod := istiodsim.Dial(b, addr, istiodsim.Options{Light: true})
	received := func() []istiodsim.Response {
		var out []istiodsim.Response
		for _, r := range istiod.Responses() {
			if r.TypeURL == url {
				out = append(out, r)
			}
		}
		return out
	}
	istiod.Wait(b, time.Minute, "the initial state", func() bool { return len(received()) > 0 })

	b.ResetTimer()
	for i := range b.N {
		n := len(received())
		svc := &fleet[i%len(fleet)]
		if e := &svc.Endpoints[1]; e.Weight == 2 {
			e.Weight = 3
		} else {
			e.Weight = 2
		}
		srv.Apply(served(translated(b, tr, *svc)), nil)
		istiod.Wait(b, time.Minute, "the push", func() bool { return len(received()) > n })
	}
	b.StopTimer()
	last := received()[len(received())-1]
	full := collections{}
	for _, svc := range fleet {
		full.put(translated(b, tr, svc))
	}
	resp := full.sotw(b, kind)
	start := time.Now()
	const marshals = 3
	for range marshals {
		if _, err := proto.Marshal(resp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(last.Bytes), "push-B")
	b.ReportMetric(float64(last.Count), "resources")
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/marshals, "marshal-ns")
}

// served are a service's resources as the bridge applies them: each under
// every type URL of its kind. A weight change removes nothing.
func served(res Result) []xds.Resource {
	var out []xds.Resource
	for _, r := range res.Resources {
		for _, url := range r.Kind.TypeURLs() {
			out = append(out, xds.Resource{Type: url, Name: r.Name, Message: r.Message})
		}
	}
	return out
}
