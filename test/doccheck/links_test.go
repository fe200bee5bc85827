package doccheck

import (
	"strings"
	"testing"
)

// TestLinks checks every relative link of README.md and docs/**/*.md:
// the file or directory exists, and a fragment names a heading of the
// document it leads to. And every guide in docs/ (and docs/dev/) is
// reached from README.md through the index, docs/README.md.
func TestLinks(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Docs(root)
	if err != nil {
		t.Fatal(err)
	}
	problems, reaches, err := CheckLinks(root, docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	reached := map[string]bool{"README.md": true}
	for queue := []string{"README.md"}; len(queue) > 0; queue = queue[1:] {
		for _, next := range reaches[queue[0]] {
			if !reached[next] {
				reached[next] = true
				queue = append(queue, next)
			}
		}
	}
	if !reached["docs/README.md"] {
		t.Error("README.md does not link the docs index, docs/README.md")
	}
	for _, d := range docs {
		guide := strings.Count(d, "/") == 1 || strings.HasPrefix(d, "docs/dev/") && strings.Count(d, "/") == 2
		if guide && !reached[d] {
			t.Errorf("%s is not reached from README.md through docs/README.md", d)
		}
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		" Static clusters → EDS-only (`examples/migration/static-to-eds`)": "static-clusters--eds-only-examplesmigrationstatic-to-eds",
		" Admin status page at 10,000 services and 1,000 clients":          "admin-status-page-at-10000-services-and-1000-clients",
		" `type: consul`":                      "type-consul",
		" xds.rest: REST-JSON polling":         "xdsrest-rest-json-polling",
		" A [linked](x.md) heading":            "a-linked-heading",
		" Consul source: every kind of change": "consul-source-every-kind-of-change",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
