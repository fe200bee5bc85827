package dockerfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Dockerfile")
	text := `# syntax=docker/dockerfile:1
FROM golang:1.26 AS build
RUN go build \
    # a comment inside a continuation
    -o /out/x ./cmd/x

FROM base:1
HEALTHCHECK --interval=10s --timeout=5s \
    CMD ["/x", "check"]
ENTRYPOINT ["/x", "run"]
`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Stages) != 2 || f.Stage("build") == nil || f.Final().From != "base:1" {
		t.Fatalf("stages %+v", f.Stages)
	}
	if run := f.Stage("build").All("RUN"); len(run) != 1 || run[0].Args != "go build -o /out/x ./cmd/x" || run[0].Line != 3 {
		t.Errorf("RUN = %+v", run)
	}
	for cmd, want := range map[string][]string{"HEALTHCHECK": {"/x", "check"}, "ENTRYPOINT": {"/x", "run"}} {
		in := f.Final().All(cmd)
		if len(in) != 1 {
			t.Fatalf("%s: %+v", cmd, in)
		}
		if argv, err := in[0].Exec(); err != nil || !slices.Equal(argv, want) {
			t.Errorf("%s exec form %q, %v; want %q", cmd, argv, err, want)
		}
	}
	if _, err := (Instruction{Cmd: "CMD", Args: "run it", Line: 9}).Exec(); err == nil {
		t.Error("shell form read as exec form")
	}
}
