package deploycheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Node is what the downward API would tell a pod about where it runs: the
// values of the fieldRef paths it may read (status.hostIP, metadata.name,
// ...).
type Node struct {
	Fields map[string]string
}

// Secrets are the Secrets that exist in the pod's namespace: name -> key
// -> content. A test gives placeholder content; a Secret missing here is
// one the user has not created.
type Secrets map[string]map[string]string

// memoryDivisors are the divisors the API server accepts in a
// resourceFieldRef of a memory resource, and cpuDivisors those of a cpu
// resource (Kubernetes' core validation). The API types accept any
// quantity, so the strict decoding alone would not catch another.
var (
	memoryDivisors = []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
	cpuDivisors    = []string{"1m", "1"}
)

// ContainerEnv returns the environment Kubernetes would give container c,
// as NAME=value entries in order: literal values with $(NAME) references
// to earlier entries expanded ($$ is a literal $), downward API fields from
// node, resource fields from the container's own resources, and Secret keys
// from secrets (an optional reference to a missing Secret or key leaves the
// variable out, a required one is an error, as the kubelet would not start
// the container). ConfigMap references are not supported.
func ContainerEnv(c corev1.Container, node Node, secrets Secrets) ([]string, error) {
	vals := map[string]string{}
	var out []string
	for _, e := range c.Env {
		v, ok, err := envValue(c, e, node, secrets, vals)
		if err != nil {
			return nil, fmt.Errorf("container %s env %s: %w", c.Name, e.Name, err)
		}
		if !ok {
			continue
		}
		vals[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return out, nil
}

// envValue is the value of one env entry; ok is false for an optional
// reference that resolves to nothing.
func envValue(c corev1.Container, e corev1.EnvVar, node Node, secrets Secrets, earlier map[string]string) (string, bool, error) {
	from := e.ValueFrom
	switch {
	case from == nil:
		return expand(e.Value, earlier), true, nil
	case from.FieldRef != nil:
		v, ok := node.Fields[from.FieldRef.FieldPath]
		if !ok {
			return "", false, fmt.Errorf("no value for fieldRef %s", from.FieldRef.FieldPath)
		}
		return v, true, nil
	case from.ResourceFieldRef != nil:
		v, err := resourceField(c, from.ResourceFieldRef)
		return v, err == nil, err
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		v, ok := secrets[ref.Name][ref.Key]
		if !ok {
			if ref.Optional != nil && *ref.Optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %s has no key %s, and the reference is not optional", ref.Name, ref.Key)
		}
		return v, true, nil
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// expand replaces $(NAME) by the value of an earlier variable and $$ by $,
// and leaves other references as they are, as the kubelet does.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := vars[name]; ok {
					b.WriteString(v)
					i += 2 + end
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// resourceField is the value of a resourceFieldRef: the container's request
// or limit divided by the divisor, rounded up, as the kubelet computes it.
// A limit the container does not set would be the node's allocatable
// capacity, which depends on the node, so it is an error here.
func resourceField(c corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		return "", fmt.Errorf("resourceFieldRef names container %q, not its own", ref.ContainerName)
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		return "", fmt.Errorf("the container sets no %s", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	allowed := memoryDivisors
	if name == "cpu" {
		allowed = cpuDivisors
	}
	if !slices.Contains(allowed, divisor.String()) {
		return "", fmt.Errorf("divisor %s of %s is not one the API server accepts (%s)", divisor.String(), ref.Resource, strings.Join(allowed, ", "))
	}
	// Both are exact integers at the milli scale for every value here.
	n, d := q.MilliValue(), divisor.MilliValue()
	return fmt.Sprint((n + d - 1) / d), nil
}

// WriteVolume writes the files of a configMap, secret or projected volume
// under dir as the kubelet would lay them out: each item's key at its path,
// or every key when no items are listed. A missing ConfigMap, Secret or key
// is an error unless the source is optional.
func WriteVolume(dir string, v corev1.Volume, configMaps map[string]*corev1.ConfigMap, secrets Secrets) error {
	var sources []corev1.VolumeProjection
	switch {
	case v.Projected != nil:
		sources = v.Projected.Sources
	case v.ConfigMap != nil:
		sources = []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: v.ConfigMap.LocalObjectReference, Items: v.ConfigMap.Items, Optional: v.ConfigMap.Optional}}}
	case v.Secret != nil:
		sources = []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: v.Secret.SecretName}, Items: v.Secret.Items, Optional: v.Secret.Optional}}}
	case v.EmptyDir != nil:
		return os.MkdirAll(dir, 0o755)
	default:
		return fmt.Errorf("volume %s: unsupported volume type", v.Name)
	}
	for _, s := range sources {
		var name string
		var data map[string]string
		var items []corev1.KeyToPath
		var optional *bool
		switch {
		case s.ConfigMap != nil:
			name, items, optional = "configmap "+s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional
			if cm := configMaps[s.ConfigMap.Name]; cm != nil {
				data = cm.Data
			}
		case s.Secret != nil:
			name, items, optional = "secret "+s.Secret.Name, s.Secret.Items, s.Secret.Optional
			data = secrets[s.Secret.Name]
		default:
			return fmt.Errorf("volume %s: unsupported projection", v.Name)
		}
		if err := writeItems(dir, data, items, optional != nil && *optional); err != nil {
			return fmt.Errorf("volume %s, %s: %w", v.Name, name, err)
		}
	}
	return nil
}

func writeItems(dir string, data map[string]string, items []corev1.KeyToPath, optional bool) error {
	if data == nil {
		if optional {
			return nil
		}
		return fmt.Errorf("does not exist, and the source is not optional")
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		content, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("has no key %s", it.Key)
		}
		p := filepath.Join(dir, filepath.FromSlash(it.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}
