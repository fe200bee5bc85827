package zookeeper

import (
	"maps"
	"slices"
	"strconv"
	"testing"
)

func curatorJSON(addr string, port int) []byte {
	return []byte(`{"name":"s","id":"x","address":"` + addr + `","port":` + strconv.Itoa(port) + `,"sslPort":null}`)
}

// TestTree drives the tree through the reads of a curator base path and
// checks what it asks to read next and what it builds.
func TestTree(t *testing.T) {
	cfg := Config{Chroot: "/prod", Services: []Service{{Path: "/services", Format: "curator"}}}
	tr := newTree(&cfg)
	dirty := func(want ...string) {
		t.Helper()
		if got := slices.Sorted(maps.Keys(tr.dirty)); !slices.Equal(got, want) {
			t.Fatalf("dirty = %q, want %q", got, want)
		}
	}
	dirty("/prod/services")
	tr.apply(read{path: "/prod/services", children: []string{"web", "api"}})
	dirty("/prod/services/api", "/prod/services/web")
	tr.apply(read{path: "/prod/services/api"})
	tr.apply(read{path: "/prod/services/web", children: []string{"a", "b", "c"}})
	dirty("/prod/services/web/a", "/prod/services/web/b", "/prod/services/web/c")
	tr.apply(read{path: "/prod/services/web/a", data: curatorJSON("10.0.0.1", 8080), version: 2})
	tr.apply(read{path: "/prod/services/web/b", data: curatorJSON("10.0.0.1", 8080)}) // the same address: served once
	if n := tr.apply(read{path: "/prod/services/web/c", data: []byte("{")}); n != 1 {
		t.Fatalf("a bad instance counted %d times, want 1", n)
	}
	dirty()
	if got := slices.Sorted(maps.Keys(tr.changed)); !slices.Equal(got, []string{"api", "web"}) {
		t.Fatalf("changed = %q", got)
	}
	web, ok := tr.build("web")
	if !ok || len(web.Endpoints) != 1 || web.Endpoints[0].Origin.Record != "znode /prod/services/web/b version 0" {
		t.Fatalf("web = %+v, %v", web, ok)
	}
	if api, ok := tr.build("api"); !ok || len(api.Endpoints) != 0 {
		t.Fatalf("api = %+v, %v; want present and empty", api, ok)
	}
	if tr.bad["/prod/services/web/c"] == "" {
		t.Fatal("the bad znode is not named")
	}

	// The bad instance is fixed, one instance goes, then the service.
	clear(tr.changed)
	tr.apply(read{path: "/prod/services/web/c", data: curatorJSON("10.0.0.3", 8080), version: 1})
	tr.apply(read{path: "/prod/services/web", children: []string{"a", "c"}})
	if web, _ := tr.build("web"); len(web.Endpoints) != 2 || len(tr.bad) != 0 {
		t.Fatalf("web = %+v, bad %v", web, tr.bad)
	}
	tr.apply(read{path: "/prod/services", children: []string{"api"}})
	if _, ok := tr.build("web"); ok || !tr.changed["web"] || len(tr.members) != 0 {
		t.Fatalf("web still built after its znode went (members %v)", tr.members)
	}
	// A znode event for a path no longer watched reads nothing.
	if tr.known("/prod/services/web/a") {
		t.Fatal("a dropped member is still known")
	}

	tr.restart()
	dirty("/prod/services")
	if len(tr.byName) != 0 {
		t.Fatal("restart kept services")
	}
}

func TestTreeFlatAndDubbo(t *testing.T) {
	cfg := Config{Services: []Service{{Path: "/ss/hello", Format: "serverset", Cluster: "hello"}, {Path: "/dubbo", Format: "dubbo"}}}
	tr := newTree(&cfg)
	tr.apply(read{path: "/ss/hello", missing: true})
	if _, ok := tr.build("hello"); ok {
		t.Fatal("a missing serverset path built a service")
	}
	tr.apply(read{path: "/ss/hello", children: []string{"lock", "member_0000000001"}})
	if !tr.dirty["/ss/hello/member_0000000001"] || tr.dirty["/ss/hello/lock"] {
		t.Fatalf("dirty = %v, want the member only", tr.dirty)
	}
	tr.apply(read{path: "/dubbo", children: []string{"org.example.Greeter", "config"}})
	tr.apply(read{path: "/dubbo/config/providers", missing: true})
	tr.apply(read{path: "/dubbo/org.example.Greeter/providers", children: []string{"dubbo%3A%2F%2F10.0.0.7%3A20880%2Forg.example.Greeter%3Fside%3Dprovider"}})
	if tr.dirty["/dubbo/org.example.Greeter/providers/dubbo%3A%2F%2F10.0.0.7%3A20880%2Forg.example.Greeter%3Fside%3Dprovider"] {
		t.Fatal("a dubbo provider's data is read")
	}
	g, ok := tr.build("org.example.Greeter")
	if !ok || len(g.Endpoints) != 1 || g.Endpoints[0].Port != 20880 {
		t.Fatalf("greeter = %+v", g)
	}
	if _, ok := tr.build("config"); ok {
		t.Fatal("a dubbo node without providers built a service")
	}
}
