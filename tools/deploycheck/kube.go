package deploycheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// KubeObject is one decoded manifest document.
type KubeObject struct {
	File string // the file's base name
	Doc  int    // the document's index in the file, from 0
	Obj  runtime.Object
}

// kubeScheme holds the API groups the manifests may use: Kubernetes' own
// and the Prometheus Operator's (deploy/kubernetes/monitoring). A kind
// outside it is an error: the check would otherwise not know its schema.
var kubeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("registering the Kubernetes API types: %v", err))
		}
	}
	return s
}()

// strictYAML decodes YAML (or JSON) into the scheme's typed objects and
// reports unknown and duplicate fields as errors.
var strictYAML = json.NewSerializerWithOptions(json.DefaultMetaFactory, kubeScheme, kubeScheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// DecodeKube decodes every document of a YAML stream strictly into its API
// type. Documents holding only comments are skipped; a document that
// declares no apiVersion or kind, or a kind this check does not know, is an
// error.
func DecodeKube(name string, data []byte) ([]KubeObject, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []KubeObject
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s document %d: %w", name, i, err)
		}
		if empty, err := onlyComments(doc); err != nil {
			return nil, fmt.Errorf("reading %s document %d: %w", name, i, err)
		} else if empty {
			continue
		}
		obj, _, err := strictYAML.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding %s document %d: %w", name, i, err)
		}
		out = append(out, KubeObject{File: name, Doc: i, Obj: obj})
	}
}

// onlyComments reports whether a YAML document holds no value.
func onlyComments(doc []byte) (bool, error) {
	var v any
	if err := utilyaml.Unmarshal(doc, &v); err != nil {
		return false, err
	}
	return v == nil, nil
}

// LoadKube decodes every .yaml file of dir, in name order, as
// `kubectl apply -f dir` would read them.
func LoadKube(dir string) ([]KubeObject, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []KubeObject
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading manifests: %w", err)
		}
		objs, err := DecodeKube(filepath.Base(f), data)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Only returns the one object of type T among objs, or an error naming
// how many there are.
func Only[T runtime.Object](objs []KubeObject) (T, error) {
	var found []T
	for _, o := range objs {
		if t, ok := o.Obj.(T); ok {
			found = append(found, t)
		}
	}
	if len(found) != 1 {
		var zero T
		return zero, fmt.Errorf("want one %T among the manifests, found %d", zero, len(found))
	}
	return found[0], nil
}
