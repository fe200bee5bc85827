package deploycheck

import (
	"slices"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestKubeServiceMonitor checks deploy/kubernetes/monitoring against the
// manifests it scrapes: the ServiceMonitor selects the bridge's Service,
// names its admin port, and sends the admin token from the Secret the
// Deployment mounts as admin.token_file, which /metrics requires.
func TestKubeServiceMonitor(t *testing.T) {
	s := loadKube(t)
	objs, err := LoadKube(deployPath("kubernetes", "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	sm, err := Only[*monitoringv1.ServiceMonitor](objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%d objects in deploy/kubernetes/monitoring, want the ServiceMonitor alone", len(objs))
	}
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(s.service.Labels)) {
		t.Errorf("selector %v (%v) does not select the Service's labels %v", sm.Spec.Selector, err, s.service.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want the admin port's", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if !slices.ContainsFunc(s.service.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port && p.Port == 19000 }) {
		t.Errorf("endpoint port %q is not the Service's admin port", ep.Port)
	}
	if ep.Path != "/metrics" {
		t.Errorf("path %q, want /metrics", ep.Path)
	}
	token := tokenSecret(t, s)
	auth := ep.Authorization
	if auth == nil || auth.Type != "Bearer" || auth.Credentials == nil ||
		auth.Credentials.Name != token.Name || auth.Credentials.Key != token.Key {
		t.Errorf("authorization %+v, want the Bearer token of Secret %s key %s (the admin token the bridge reads)", auth, token.Name, token.Key)
	}
}

// tokenSecret is the Secret key the Deployment projects as the file the
// configuration names in admin.token_file.
func tokenSecret(t *testing.T, s kubeSet) corev1.SecretKeySelector {
	t.Helper()
	for _, v := range s.deploy.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.Secret == nil {
				continue
			}
			for _, it := range src.Secret.Items {
				if it.Path == "admin-token" {
					return corev1.SecretKeySelector{LocalObjectReference: src.Secret.LocalObjectReference, Key: it.Key}
				}
			}
		}
	}
	t.Fatal("the Deployment projects no admin-token file")
	return corev1.SecretKeySelector{}
}
