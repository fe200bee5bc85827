package deploycheck

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"github.com/hashicorp/nomad/api"
)

// TaskEnv is what a Nomad client would give a task's templates: the task's
// environment and node attributes (as consul-template's env reads them:
// NOMAD_PORT_xds, attr.unique.network.ip-address, ...) and the Nomad
// variables the task may read, by path.
type TaskEnv struct {
	Env  map[string]string
	Vars map[string]map[string]string
}

// RenderTemplates renders every template of task t into taskDir, at its
// destination, and returns the environment the templates with env = true
// declare, as NAME=value entries. The templates are rendered with Go's
// text/template, which consul-template is built on, and stand-ins for the
// consul-template functions the manifests use, with its argument order
// (the piped value comes last): env, parseInt, multiply, divide and
// nomadVar. Any other function is an error, as is a variable env does not
// have or a key a Nomad variable does not hold: the check is stricter than
// consul-template, which would render those as empty.
func RenderTemplates(t *api.Task, taskDir string, te TaskEnv) ([]string, error) {
	var env []string
	for i, tmpl := range t.Templates {
		if tmpl.EmbeddedTmpl == nil || tmpl.DestPath == nil {
			return nil, fmt.Errorf("task %s template %d: only templates with data and a destination are supported", t.Name, i)
		}
		out, err := renderTemplate(*tmpl.DestPath, *tmpl.EmbeddedTmpl, te)
		if err != nil {
			return nil, fmt.Errorf("task %s template %d: %w", t.Name, i, err)
		}
		dest := path.Clean(*tmpl.DestPath)
		if path.IsAbs(dest) || strings.HasPrefix(dest, "../") {
			return nil, fmt.Errorf("task %s template %d: destination %s leaves the task directory", t.Name, i, *tmpl.DestPath)
		}
		p := filepath.Join(taskDir, filepath.FromSlash(dest))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(out), 0o600); err != nil {
			return nil, err
		}
		if tmpl.Envvars != nil && *tmpl.Envvars {
			vars, err := parseEnvFile(out)
			if err != nil {
				return nil, fmt.Errorf("task %s template %d: %w", t.Name, i, err)
			}
			env = append(env, vars...)
		}
	}
	return env, nil
}

func renderTemplate(name, text string, te TaskEnv) (string, error) {
	funcs := template.FuncMap{
		"env": func(k string) (string, error) {
			v, ok := te.Env[k]
			if !ok {
				return "", fmt.Errorf("env %q: not in the task's environment", k)
			}
			return v, nil
		},
		"parseInt": func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) },
		"multiply": func(b, a int64) int64 { return a * b },
		"divide": func(b, a int64) (int64, error) {
			if b == 0 {
				return 0, fmt.Errorf("divide by zero")
			}
			return a / b, nil
		},
		"nomadVar": func(p string) (map[string]string, error) {
			v, ok := te.Vars[p]
			if !ok {
				return nil, fmt.Errorf("nomadVar %q: no such variable", p)
			}
			return v, nil
		},
	}
	tmpl, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, nil); err != nil {
		return "", err
	}
	return b.String(), nil
}

// parseEnvFile reads NAME=value lines, as a template with env = true
// declares them (blank lines and # comments skipped).
func parseEnvFile(s string) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, _, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("env line %q is not NAME=value", line)
		}
		out = append(out, line)
	}
	return out, sc.Err()
}
