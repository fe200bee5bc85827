package deploycheck

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "y"}
	for in, want := range map[string]string{
		"$(A):8500":   "x:8500",
		"$(A)$(B)":    "xy",
		"$$(A)":       "$(A)",
		"$(C)":        "$(C)",
		"$(A":         "$(A",
		"cost $5":     "cost $5",
		"$":           "$",
		"$(A)MiB$$":   "xMiB$",
		"no refs":     "no refs",
		"$(A)-$(B)-$": "x-y-$",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestContainerEnvResourceField(t *testing.T) {
	c := corev1.Container{
		Name: "c",
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1228Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1536Mi")},
		},
	}
	field := func(res, divisor string) corev1.EnvVar {
		return corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
			Resource: res, Divisor: resource.MustParse(divisor)}}}
	}
	for _, tc := range []struct {
		name    string
		env     corev1.EnvVar
		want    string
		wantErr string
	}{
		{"limit in MiB", field("limits.memory", "1Mi"), "V=1536", ""},
		{"request in MiB", field("requests.memory", "1Mi"), "V=1228", ""},
		{"rounded up", field("limits.memory", "1Gi"), "V=2", ""},
		{"a divisor the API server refuses", field("limits.memory", "1280Ki"), "", "not one the API server accepts"},
		{"a limit not set", field("limits.cpu", "1"), "", "sets no limits.cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := c
			c.Env = []corev1.EnvVar{tc.env}
			env, err := ContainerEnv(c, Node{}, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(env, []string{tc.want}) {
				t.Fatalf("env = %v, %v; want [%s]", env, err, tc.want)
			}
		})
	}
}

func TestContainerEnvSecrets(t *testing.T) {
	optional := true
	ref := func(opt *bool) corev1.EnvVar {
		return corev1.EnvVar{Name: "T", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "token", Optional: opt}}}
	}
	c := corev1.Container{Name: "c", Env: []corev1.EnvVar{ref(&optional), {Name: "U", Value: "[$(T)]"}}}
	env, err := ContainerEnv(c, Node{}, nil)
	if err != nil || !slices.Equal(env, []string{"U=[$(T)]"}) {
		t.Errorf("an optional secret that does not exist: env %v, %v; want T unset and its reference kept", env, err)
	}
	env, err = ContainerEnv(c, Node{}, Secrets{"s": {"token": "abc"}})
	if err != nil || !slices.Equal(env, []string{"T=abc", "U=[abc]"}) {
		t.Errorf("an optional secret that exists: env %v, %v", env, err)
	}
	c.Env = []corev1.EnvVar{ref(nil)}
	if _, err := ContainerEnv(c, Node{}, nil); err == nil {
		t.Error("a required secret that does not exist: no error")
	}
}
