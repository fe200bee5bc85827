package deploycheck

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// kubeSet is the decoded deploy/kubernetes folder.
type kubeSet struct {
	deploy    *appsv1.Deployment
	service   *corev1.Service
	configMap *corev1.ConfigMap
	pdb       *policyv1.PodDisruptionBudget
	account   *corev1.ServiceAccount
}

func loadKube(t *testing.T) kubeSet {
	t.Helper()
	objs, err := LoadKube(deployPath("kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	var s kubeSet
	for _, get := range []func() error{
		func() (err error) { s.deploy, err = Only[*appsv1.Deployment](objs); return err },
		func() (err error) { s.service, err = Only[*corev1.Service](objs); return err },
		func() (err error) { s.configMap, err = Only[*corev1.ConfigMap](objs); return err },
		func() (err error) { s.pdb, err = Only[*policyv1.PodDisruptionBudget](objs); return err },
		func() (err error) { s.account, err = Only[*corev1.ServiceAccount](objs); return err },
	} {
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	if len(objs) != 5 {
		t.Fatalf("%d objects in deploy/kubernetes, want the 5 checked here", len(objs))
	}
	return s
}

// bridgeContainer is the Deployment's only container.
func (s kubeSet) bridgeContainer(t *testing.T) corev1.Container {
	t.Helper()
	cs := s.deploy.Spec.Template.Spec.Containers
	if len(cs) != 1 || len(s.deploy.Spec.Template.Spec.InitContainers) != 0 {
		t.Fatalf("want one container, have %d (and %d init containers)", len(cs), len(s.deploy.Spec.Template.Spec.InitContainers))
	}
	return cs[0]
}

// TestKubeStrictDecoding checks that the decoding the manifests pass
// rejects what the API server's strict field validation rejects: a change
// that only renames or repeats a field must fail.
func TestKubeStrictDecoding(t *testing.T) {
	orig := string(readDeploy(t, "kubernetes", "deployment.yaml"))
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"misspelt field", "readinessProbe:", "readynessProbe:", `unknown field "spec.template.spec.containers[0].readynessProbe"`},
		{"field of another type", "  replicas: 3", "  replicas: 3\n  selectors: {}", `unknown field "spec.selectors"`},
		{"repeated field", "  replicas: 3", "  replicas: 3\n  replicas: 4", `"replicas"`},
		{"wrong value type", "  replicas: 3", "  replicas: three", "replicas"},
		{"unknown kind", "kind: Deployment", "kind: Deploymint", "Deploymint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(orig, tc.old) {
				t.Fatalf("deployment.yaml has no %q to change", tc.old)
			}
			_, err := DecodeKube("deployment.yaml", []byte(strings.Replace(orig, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decoding the changed manifest: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestKubeDeployment checks what docs/deployment.md promises of the
// Deployment: three replicas rolled one at a time without losing capacity,
// the image's non-root user with nothing writable but the state volume,
// the probes on the admin port, and selectors that select the pods.
func TestKubeDeployment(t *testing.T) {
	s := loadKube(t)
	d := s.deploy
	pod := d.Spec.Template
	c := s.bridgeContainer(t)

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %v, want 3", d.Spec.Replicas)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil || ru.MaxSurge.String() != "1" || ru.MaxUnavailable.String() != "0" {
		t.Errorf("rolling update %+v, want maxSurge 1 and maxUnavailable 0", ru)
	}

	psc, csc := pod.Spec.SecurityContext, c.SecurityContext
	if psc == nil || csc == nil {
		t.Fatal("the pod and the container need a securityContext")
	}
	if psc.RunAsUser == nil || *psc.RunAsUser != 65532 || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod securityContext %+v, want runAsNonRoot as the image's user 65532", psc)
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) != 0 {
		t.Errorf("container securityContext %+v, want no privilege escalation, a read-only root and every capability dropped", csc)
	}

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.StrVal != "http-admin" {
			t.Errorf("%s probe %+v, want GET %s on the port http-admin", p.name, p.probe, p.path)
		}
	}
	if _, ok := ports["http-admin"]; !ok {
		t.Errorf("no container port http-admin among %v", ports)
	}

	podLabels := labels.Set(pod.Labels)
	for name, sel := range map[string]*metav1.LabelSelector{"deployment": d.Spec.Selector, "pdb": s.pdb.Spec.Selector} {
		if !selects(t, sel, podLabels) {
			t.Errorf("the %s's selector %v does not select the pods (%v)", name, sel, podLabels)
		}
	}
	if !labels.SelectorFromSet(s.service.Spec.Selector).Matches(podLabels) {
		t.Errorf("the service's selector %v does not select the pods (%v)", s.service.Spec.Selector, podLabels)
	}
	if len(pod.Spec.TopologySpreadConstraints) == 0 {
		t.Error("no topology spread constraints")
	}
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		if !selects(t, tsc.LabelSelector, podLabels) {
			t.Errorf("the spread over %s does not count the pods", tsc.TopologyKey)
		}
	}
	if s.pdb.Spec.MaxUnavailable == nil || s.pdb.Spec.MaxUnavailable.String() != "1" {
		t.Errorf("pdb maxUnavailable %v, want 1", s.pdb.Spec.MaxUnavailable)
	}
	if pod.Spec.ServiceAccountName != s.account.Name || pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("the pods run as %q with automountServiceAccountToken %v, want %q without a token", pod.Spec.ServiceAccountName, pod.Spec.AutomountServiceAccountToken, s.account.Name)
	}
}

// TestKubeService checks that the Service is a virtual IP in front of both
// named ports, the xDS one named for gRPC.
func TestKubeService(t *testing.T) {
	s := loadKube(t)
	c := s.bridgeContainer(t)
	svc := s.service.Spec
	if svc.ClusterIP == corev1.ClusterIPNone || svc.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service type %s, clusterIP %q: want a ClusterIP service, not headless", svc.Type, svc.ClusterIP)
	}
	names := map[string]bool{}
	for _, p := range c.Ports {
		names[p.Name] = true
	}
	var xds bool
	for _, p := range svc.Ports {
		if !names[p.TargetPort.StrVal] {
			t.Errorf("service port %s targets %q, not a named container port", p.Name, p.TargetPort.String())
		}
		xds = xds || (p.Name == "grpc-xds" && p.TargetPort.StrVal == "grpc-xds")
	}
	if !xds {
		t.Errorf("no service port grpc-xds targeting the container's grpc-xds in %+v", svc.Ports)
	}
}

// TestKubeMemoryLimit checks that GOMEMLIMIT, as the kubelet would resolve
// it, is about 80 % of the container's memory limit.
func TestKubeMemoryLimit(t *testing.T) {
	s := loadKube(t)
	c := s.bridgeContainer(t)
	env, err := ContainerEnv(c, Node{Fields: map[string]string{"status.hostIP": testHostIP}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var limit string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "GOMEMLIMIT="); ok {
			limit = v
		}
	}
	mib, ok := strings.CutSuffix(limit, "MiB")
	if !ok {
		t.Fatalf("GOMEMLIMIT = %q, want a number of MiB", limit)
	}
	got := resource.MustParse(mib + "Mi")
	max := c.Resources.Limits[corev1.ResourceMemory]
	ratio := float64(got.Value()) / float64(max.Value())
	t.Logf("GOMEMLIMIT %s of a %s limit: %.3f", limit, max.String(), ratio)
	if ratio < 0.75 || ratio > 0.85 {
		t.Errorf("GOMEMLIMIT %s is %.2f of the memory limit %s, want about 0.8", limit, ratio, max.String())
	}
}

// TestKubeConfigValidates lays out the container's files as the kubelet
// would (the projected configuration and token, the state volume) and runs
// `bridge validate` on the configuration with the container's environment.
func TestKubeConfigValidates(t *testing.T) {
	s := loadKube(t)
	c := s.bridgeContainer(t)
	root := t.TempDir()
	secrets := Secrets{"xdsbridge-admin-token": {"token": "placeholder"}}
	volumes := map[string]corev1.Volume{}
	for _, v := range s.deploy.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	writable := []string{}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("volume mount %s names no volume", m.Name)
		}
		cms := map[string]*corev1.ConfigMap{s.configMap.Name: s.configMap}
		if err := WriteVolume(filepath.Join(root, m.MountPath), v, cms, secrets); err != nil {
			t.Fatal(err)
		}
		if !m.ReadOnly {
			writable = append(writable, m.MountPath)
		}
	}
	env, err := ContainerEnv(c, Node{Fields: map[string]string{"status.hostIP": testHostIP}}, secrets)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "CONSUL_HTTP_ADDR="+testHostIP+":8500") {
		t.Errorf("the environment %v does not point CONSUL_HTTP_ADDR at the node's agent", env)
	}
	// The container runs the image's default command, which reads this
	// file.
	if len(c.Command) > 0 || len(c.Args) > 0 {
		t.Errorf("the container overrides the image's entrypoint or command (%q %q)", c.Command, c.Args)
	}
	img, err := ReadImage(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	path, err := ConfigFlag(img.Cmd)
	if err != nil {
		t.Fatalf("the image's command: %v", err)
	}
	cfg := filepath.Join(root, path)
	sum, err := Validate(bridgeBin, cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bridge validate:\n%s", sum.Output)
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = int(p.ContainerPort)
	}
	if listenPort(t, sum.XDSListen) != ports["grpc-xds"] || listenPort(t, sum.AdminListen) != ports["http-admin"] {
		t.Errorf("the bridge listens on %s (xDS) and %s (admin), the container's ports are %v", sum.XDSListen, sum.AdminListen, ports)
	}
	if !slices.Equal(sum.Sources, []string{"consul (consul)"}) || len(sum.Warnings) > 0 {
		t.Errorf("sources %v and warnings %q, want the consul source and no warning", sum.Sources, sum.Warnings)
	}

	// The root filesystem is read-only: the state directory must be on a
	// writable volume.
	var conf struct {
		StateDir string `json:"state_dir"`
	}
	if err := yaml.Unmarshal([]byte(s.configMap.Data["bridge.yaml"]), &conf); err != nil {
		t.Fatal(err)
	}
	if conf.StateDir != "" && !slices.ContainsFunc(writable, func(m string) bool { return within(conf.StateDir, m) }) {
		t.Errorf("state_dir %s is on no writable volume (%v), and the root filesystem is read-only", conf.StateDir, writable)
	}
}

func selects(t *testing.T, sel *metav1.LabelSelector, set labels.Set) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(set)
}

// within reports whether path p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
