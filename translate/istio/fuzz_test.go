package istio

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	networkingv1alpha3 "istio.io/api/networking/v1alpha3"

	"github.com/xdsbridge/xdsbridge/sources"
)

// FuzzService translates services made of arbitrary registry text (the
// service name, one metadata entry, the tags, a locality) and endpoint
// bytes (4 a endpoint: address, port, health): translation never panics,
// every resource of an accepted service passes validation again once
// decoded, its names and labels included, and another endpoint order gives
// the same bytes.
func FuzzService(f *testing.F) {
	f.Add("web", "protocol", "http", "canary,v=1", "eu", []byte{1, 0x1f, 0x90, 1}, false)
	f.Add("Web_API.v2", "node:rack", "r 1/2", "Weird Tag!,protocol=grpc", "a/b", []byte{1, 0, 80, 1, 2, 0, 81, 2, 0x81, 0, 80, 3}, true)
	f.Add("", "", "", "", "", []byte{}, true)
	f.Fuzz(func(t *testing.T, name, key, value, tags, region string, b []byte, workloadEntries bool) {
		svc := sources.Service{Name: name, Source: "consul"}
		for ; len(b) >= 4; b = b[4:] {
			addr := fmt.Sprintf("10.0.0.%d", b[0]&0x7f)
			if b[0]&0x80 != 0 {
				addr = fmt.Sprintf("2001:db8::%x", b[0]&0x7f)
			}
			svc.Endpoints = append(svc.Endpoints, sources.Endpoint{
				Address: addr, Port: uint32(b[1])<<8 | uint32(b[2]), Health: sources.Health(b[3] % 5),
				Locality: sources.Locality{Region: region},
				Metadata: map[string]string{key: value, sources.MetaTags: tags},
			})
		}
		shape := ShapeInline
		if workloadEntries {
			shape = ShapeWorkloadEntries
		}
		tr := translator(t, Options{Shape: shape})
		res, err := tr.Service(svc)
		if err != nil {
			return
		}
		revalidate(t, res)
		rev := svc.Clone()
		slices.Reverse(rev.Endpoints)
		again, err := tr.Service(rev)
		if err != nil {
			t.Fatalf("reordered endpoints fail: %v", err)
		}
		for i, r := range again.Resources {
			x, _ := deterministic.Marshal(res.Resources[i].Message)
			y, _ := deterministic.Marshal(r.Message)
			if !bytes.Equal(x, y) {
				t.Fatalf("endpoint order changes %s", r.Name)
			}
		}
	})
}

// revalidate decodes every resource of res and checks it again.
func revalidate(t *testing.T, res Result) {
	t.Helper()
	var ports map[string]bool
	var selector map[string]string
	for _, r := range res.Resources {
		ns, name, _ := strings.Cut(r.Name, "/")
		body, err := r.Message.GetBody().UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		switch b := body.(type) {
		case *networkingv1alpha3.ServiceEntry:
			if err := checkServiceEntry(ns, name, b); err != nil {
				t.Fatalf("%s: %v", r.Name, err)
			}
			ports, _ = checkPorts(b.GetPorts())
			selector = b.GetWorkloadSelector().GetLabels()
		case *networkingv1alpha3.WorkloadEntry:
			if err := checkWorkloadEntry(ns, name, b, ports, selector); err != nil {
				t.Fatalf("%s: %v", r.Name, err)
			}
		}
	}
}
