package helmtest

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/internal/cli"
	"github.com/trainyard/trainyard/internal/install"
	"github.com/trainyard/trainyard/internal/testkube"
)

// loadChart loads charts/trainyard from this checkout.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	ch, err := loader.Load(filepath.Join(filepath.Dir(file), "..", "..", "charts", "trainyard"))
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return ch
}

// render renders the chart as `helm template --include-crds` does, for a release named
// trainyard in ns.
func render(t *testing.T, ch *chart.Chart, ns string, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	in := action.NewInstall(action.NewConfiguration())
	in.DryRunStrategy = action.DryRunClient
	in.ReleaseName = "trainyard"
	in.Namespace = ns
	in.IncludeCRDs = true
	// `helm template` assumes the Kubernetes version of the client-go it was built with;
	// a test binary lacks that stamp, so say it.
	kv, err := common.ParseKubeVersion("v" + testkube.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	in.KubeVersion = kv
	rel, err := in.Run(ch, values)
	if err != nil {
		t.Fatalf("render the chart with %v: %v", values, err)
	}
	return byKind(t, rel.(*release.Release).Manifest)
}

// key names an object in the maps of render and installed: "Kind" for the chart's first
// object of a kind, "Kind name" for every one.
func key(obj *unstructured.Unstructured) string { return obj.GetKind() + " " + obj.GetName() }

// byKind splits a manifest into its objects, keyed by kind and by key.
func byKind(t *testing.T, manifest string) map[string]*unstructured.Unstructured {
	t.Helper()
	objs := map[string]*unstructured.Unstructured{}
	for _, doc := range strings.Split(manifest, "\n---") {
		data, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("the chart renders invalid YAML: %v\n%s", err, doc)
		}
		if s := strings.TrimSpace(string(data)); s == "null" || s == "{}" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			t.Fatalf("the chart renders a document that is not an object: %v\n%s", err, doc)
		}
		if objs[key(obj)] != nil {
			t.Fatalf("the chart renders two %ss", key(obj))
		}
		objs[key(obj)] = obj
		if objs[obj.GetKind()] == nil {
			objs[obj.GetKind()] = obj
		}
	}
	return objs
}

// typed converts an object into its Go type, refusing fields the type lacks.
func typed[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	if obj == nil {
		t.Fatalf("no %T rendered", new(T))
	}
	out := new(T)
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return out
}

// installed returns what `trainyard install` renders, keyed by kind.
func installed(t *testing.T, opts install.Options) map[string]*unstructured.Unstructured {
	t.Helper()
	objs, err := install.Render(opts)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		m[key(obj)] = obj
		if m[obj.GetKind()] == nil {
			m[obj.GetKind()] = obj
		}
	}
	return m
}

// With default values the chart makes what `trainyard install` makes, but the namespace
// (Helm's --create-namespace does that) and the labels.
func TestChartMatchesInstall(t *testing.T) {
	ch := loadChart(t)
	got := render(t, ch, "trainyard-system", nil)
	image := "ghcr.io/trainyard/trainyard:" + ch.Metadata.AppVersion
	want := installed(t, install.Options{Namespace: "trainyard-system", Image: image})

	var kinds []string
	for kind := range got {
		if strings.Contains(kind, " ") {
			kinds = append(kinds, kind)
		}
	}
	slices.Sort(kinds)
	wantKinds := []string{"ClusterRole trainyard-operator", "ClusterRole trainyard-operator-metrics-reader", "ClusterRoleBinding trainyard-operator",
		"CustomResourceDefinition trainjobs.trainyard.dev", "Deployment trainyard-operator", "PriorityClass trainyard-operator-room-probe",
		"ServiceAccount trainyard-operator"}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Fatalf("objects (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(typed[rbacv1.ClusterRole](t, want["ClusterRole trainyard-operator-metrics-reader"]).Rules,
		typed[rbacv1.ClusterRole](t, got["ClusterRole trainyard-operator-metrics-reader"]).Rules); diff != "" {
		t.Errorf("the metrics reader's rules (-install +chart):\n%s", diff)
	}
	for kind, obj := range got {
		if w := want[kind]; obj.GetName() != w.GetName() || obj.GetNamespace() != w.GetNamespace() {
			t.Errorf("%s %s/%s, trainyard install makes %s/%s", kind, obj.GetNamespace(), obj.GetName(), w.GetNamespace(), w.GetName())
		}
	}

	crd := typed[apiextensionsv1.CustomResourceDefinition](t, got["CustomResourceDefinition"])
	if diff := cmp.Diff(typed[apiextensionsv1.CustomResourceDefinition](t, want["CustomResourceDefinition"]).Spec, crd.Spec); diff != "" {
		t.Errorf("CRD spec (-install +chart); run make generate:\n%s", diff)
	}
	role := typed[rbacv1.ClusterRole](t, got["ClusterRole"])
	if diff := cmp.Diff(typed[rbacv1.ClusterRole](t, want["ClusterRole"]).Rules, role.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-install +chart); run make generate:\n%s", diff)
	}
	binding := typed[rbacv1.ClusterRoleBinding](t, got["ClusterRoleBinding"])
	wantBinding := typed[rbacv1.ClusterRoleBinding](t, want["ClusterRoleBinding"])
	if diff := cmp.Diff(wantBinding.Subjects, binding.Subjects); diff != "" || binding.RoleRef != wantBinding.RoleRef {
		t.Errorf("ClusterRoleBinding (-install +chart): %s\nroleRef %+v", diff, binding.RoleRef)
	}
	d := typed[appsv1.Deployment](t, got["Deployment"])
	if diff := cmp.Diff(typed[appsv1.Deployment](t, want["Deployment"]).Spec, d.Spec); diff != "" {
		t.Errorf("Deployment spec (-install +chart); keep charts/trainyard/templates/deployment.yaml "+
			"in step with config/manager/deployment.yaml:\n%s", diff)
	}
	for kind, obj := range got {
		if obj.GetKind() != "CustomResourceDefinition" && obj.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s lacks app.kubernetes.io/managed-by: Helm: %v", kind, obj.GetLabels())
		}
	}
}

// What each value changes in the Deployment.
func TestChartValues(t *testing.T) {
	ch := loadChart(t)
	cases := map[string]struct {
		values string
		check  func(t *testing.T, d *appsv1.Deployment, objs map[string]*unstructured.Unstructured)
	}{
		"image": {"image: {repository: registry.local/trainyard, tag: v9, pullPolicy: Always}", func(t *testing.T, d *appsv1.Deployment, _ map[string]*unstructured.Unstructured) {
			c := d.Spec.Template.Spec.Containers[0]
			if c.Image != "registry.local/trainyard:v9" || c.ImagePullPolicy != corev1.PullAlways ||
				c.Args[slices.Index(c.Args, "--image")+1] != c.Image {
				t.Errorf("image %q (%s), args %q", c.Image, c.ImagePullPolicy, c.Args)
			}
		}},
		"no leader election, no metrics, one namespace": {"{leaderElect: false, metrics: {enabled: false}, watchNamespace: team-a}",
			func(t *testing.T, d *appsv1.Deployment, _ map[string]*unstructured.Unstructured) {
				c := d.Spec.Template.Spec.Containers[0]
				want := []string{"operator", "--metrics-bind-address", "0", "--health-probe-bind-address", ":8081",
					"--image", "ghcr.io/trainyard/trainyard:" + ch.Metadata.AppVersion, "--worker-cpu-per-gpu", "2", "--worker-memory-per-gpu", "8Gi",
					"--pod-policy", "restricted", "--namespace", "team-a", "--room-probe-priority-class", "trainyard-operator-room-probe"}
				if diff := cmp.Diff(want, c.Args); diff != "" {
					t.Errorf("args (-want +got):\n%s", diff)
				}
				if len(c.Ports) != 1 || c.Ports[0].Name != "health" {
					t.Errorf("ports %+v, want health only", c.Ports)
				}
			}},
		"pod policy, API server addresses, plain metrics": {"{podPolicy: \"off\", apiServerCIDRs: [10.0.0.1/32], metrics: {secure: false}}",
			func(t *testing.T, d *appsv1.Deployment, _ map[string]*unstructured.Unstructured) {
				c := d.Spec.Template.Spec.Containers[0]
				want := []string{"--pod-policy", "off", "--api-server-cidr", "10.0.0.1/32", "--room-probe-priority-class",
					"trainyard-operator-room-probe", "--metrics-secure=false"}
				if diff := cmp.Diff(want, c.Args[len(c.Args)-len(want):]); diff != "" {
					t.Errorf("args (-want +got):\n%s", diff)
				}
			}},
		"room probe image": {"{roomProbeImage: localhost/pause:1}", func(t *testing.T, d *appsv1.Deployment, _ map[string]*unstructured.Unstructured) {
			c := d.Spec.Template.Spec.Containers[0]
			if want := []string{"--room-probe-image", "localhost/pause:1"}; !slices.Equal(c.Args[len(c.Args)-2:], want) {
				t.Errorf("args %q, want them to end with %q", c.Args, want)
			}
		}},
		"requests per GPU": {"{workerDefaults: {cpuPerGPU: 0.5, memoryPerGPU: \"0\"}}", func(t *testing.T, d *appsv1.Deployment, _ map[string]*unstructured.Unstructured) {
			c := d.Spec.Template.Spec.Containers[0]
			i := slices.Index(c.Args, "--worker-cpu-per-gpu")
			if want := []string{"--worker-cpu-per-gpu", "0.5", "--worker-memory-per-gpu", "0"}; i < 0 || !slices.Equal(c.Args[i:i+4], want) {
				t.Errorf("args %q, want %q", c.Args, want)
			}
		}},
		"ports": {"{metrics: {port: 9090}, healthProbePort: 9091}", func(t *testing.T, d *appsv1.Deployment, _ map[string]*unstructured.Unstructured) {
			c := d.Spec.Template.Spec.Containers[0]
			if !slices.Contains(c.Args, ":9090") || !slices.Contains(c.Args, ":9091") || c.Ports[0].ContainerPort != 9090 || c.Ports[1].ContainerPort != 9091 {
				t.Errorf("args %q, ports %+v", c.Args, c.Ports)
			}
		}},
		"scheduling": {`
replicas: 3
nodeSelector: {pool: system}
tolerations: [{key: dedicated, operator: Equal, value: system, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: arch, operator: In, values: [amd64]}]}]}}}
priorityClassName: system-cluster-critical
imagePullSecrets: [{name: regcred}]
podAnnotations: {prometheus.io/scrape: "true"}
podLabels: {team: ml}
resources: {requests: {cpu: 200m}}`, func(t *testing.T, d *appsv1.Deployment, _ map[string]*unstructured.Unstructured) {
			s := d.Spec.Template.Spec
			if *d.Spec.Replicas != 3 || s.NodeSelector["pool"] != "system" || len(s.Tolerations) != 1 || s.Tolerations[0].Key != "dedicated" ||
				s.Affinity == nil || s.PriorityClassName != "system-cluster-critical" || s.ImagePullSecrets[0].Name != "regcred" {
				t.Errorf("replicas %d, pod spec %+v", *d.Spec.Replicas, s)
			}
			if d.Spec.Template.Annotations["prometheus.io/scrape"] != "true" || d.Spec.Template.Labels["team"] != "ml" ||
				d.Spec.Template.Labels["app.kubernetes.io/component"] != "operator" {
				t.Errorf("pod template metadata %+v", d.Spec.Template.ObjectMeta)
			}
			// Helm merges values into the defaults: the memory request and limit stay.
			if r := s.Containers[0].Resources; !r.Requests.Cpu().Equal(resource.MustParse("200m")) ||
				!r.Requests.Memory().Equal(resource.MustParse("128Mi")) || !r.Limits.Memory().Equal(resource.MustParse("512Mi")) {
				t.Errorf("resources %+v, want requests.cpu 200m and the default memory", r)
			}
		}},
		"fullnameOverride": {"{fullnameOverride: ty, serviceAccount: {annotations: {iam.example.com/role: trainer}}}",
			func(t *testing.T, d *appsv1.Deployment, objs map[string]*unstructured.Unstructured) {
				for kind, obj := range objs {
					if obj.GetKind() != "CustomResourceDefinition" && obj.GetName() != "ty" && obj.GetName() != "ty-metrics-reader" && obj.GetName() != "ty-room-probe" {
						t.Errorf("%s named %q, want ty", kind, obj.GetName())
					}
				}
				b := typed[rbacv1.ClusterRoleBinding](t, objs["ClusterRoleBinding"])
				if b.RoleRef.Name != "ty" || b.Subjects[0].Name != "ty" || d.Spec.Template.Spec.ServiceAccountName != "ty" {
					t.Errorf("binding %+v, service account %q", b, d.Spec.Template.Spec.ServiceAccountName)
				}
				if objs["ServiceAccount"].GetAnnotations()["iam.example.com/role"] != "trainer" {
					t.Errorf("service account annotations %v", objs["ServiceAccount"].GetAnnotations())
				}
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var values map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			objs := render(t, ch, "ops", values)
			d := typed[appsv1.Deployment](t, objs["Deployment"])
			if d.Namespace != "ops" || objs["ServiceAccount"].GetNamespace() != "ops" {
				t.Errorf("deployment in %q, service account in %q, want the release's namespace ops", d.Namespace, objs["ServiceAccount"].GetNamespace())
			}
			tc.check(t, d, objs)
		})
	}
}

// With watchNamespace the chart grants what `trainyard install --watch-namespace` grants:
// a Role and RoleBinding in the watched namespace, a Role for leader election in the
// release's, and a ClusterRole of the cluster-wide rules only.
func TestChartWatchNamespace(t *testing.T) {
	ch := loadChart(t)
	got := render(t, ch, "ops", map[string]any{"watchNamespace": "team-a"})
	want := installed(t, install.Options{Namespace: "ops", WatchNamespace: "team-a",
		Image: "ghcr.io/trainyard/trainyard:" + ch.Metadata.AppVersion})
	for _, k := range []string{"ClusterRole trainyard-operator", "Role trainyard-operator", "Role trainyard-operator-leader-election"} {
		if got[k] == nil || want[k] == nil {
			t.Fatalf("%s: chart %v, install %v", k, got[k] != nil, want[k] != nil)
		}
		if got[k].GetNamespace() != want[k].GetNamespace() {
			t.Errorf("%s in namespace %q, install puts it in %q", k, got[k].GetNamespace(), want[k].GetNamespace())
		}
		if diff := cmp.Diff(typed[rbacv1.ClusterRole](t, asClusterRole(want[k])).Rules, typed[rbacv1.ClusterRole](t, asClusterRole(got[k])).Rules); diff != "" {
			t.Errorf("%s rules (-install +chart):\n%s", k, diff)
		}
	}
	for _, k := range []string{"RoleBinding trainyard-operator", "RoleBinding trainyard-operator-leader-election", "ClusterRoleBinding trainyard-operator"} {
		g, w := typed[rbacv1.RoleBinding](t, asRoleBinding(got[k])), typed[rbacv1.RoleBinding](t, asRoleBinding(want[k]))
		if diff := cmp.Diff(w.Subjects, g.Subjects); diff != "" || g.RoleRef != w.RoleRef || g.Namespace != w.Namespace {
			t.Errorf("%s (-install +chart): %s\nroleRef %+v, install's %+v", k, diff, g.RoleRef, w.RoleRef)
		}
	}
}

// asClusterRole reads a Role's or ClusterRole's rules as a ClusterRole's.
func asClusterRole(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetKind("ClusterRole")
	out.SetNamespace("")
	return out
}

// asRoleBinding reads a ClusterRoleBinding as a RoleBinding.
func asRoleBinding(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetKind("RoleBinding")
	return out
}

// `helm install` and `helm uninstall` of the chart on a real API server, through Helm's
// Go packages: the API server accepts every object (Helm validates them against its
// OpenAPI schema), the CRD is established, and `trainyard install` refuses to take over.
func TestChartInstall(t *testing.T) {
	env := testkube.Start(t, testkube.Options{NoCRD: true})
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const ns = "trainyard-system"
	cfg := action.NewConfiguration()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, namespace := env.Kubeconfig, ns
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName = "trainyard"
	in.Namespace = ns
	in.CreateNamespace = true
	in.WaitStrategy = kube.HookOnlyStrategy
	in.Timeout = time.Minute
	if _, err := in.RunWithContext(ctx, loadChart(t), map[string]any{"image": map[string]any{"tag": "test"}}); err != nil {
		t.Fatalf("helm install: %v", err)
	}

	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "trainjobs.trainyard.dev"}, &crd); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	}) {
		t.Errorf("the CRD is not established: %+v", crd.Status.Conditions)
	}
	objs := []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}}
	for _, obj := range objs {
		obj.SetName("trainyard-operator")
		if _, ok := obj.(*rbacv1.ClusterRole); !ok {
			if _, ok := obj.(*rbacv1.ClusterRoleBinding); !ok {
				obj.SetNamespace(ns)
			}
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%T after helm install: %v", obj, err)
		}
	}

	code := cli.Main(ctx, []string{"install", "--kubeconfig", env.Kubeconfig}, cli.IO{In: strings.NewReader(""), Out: &strings.Builder{}, Err: &logWriter{t}})
	if code != 1 {
		t.Errorf("trainyard install over a Helm release: exit %d, want 1", code)
	}

	un := action.NewUninstall(cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	if _, err := un.Run("trainyard"); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	for _, obj := range objs {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T after helm uninstall: %v", obj, err)
		}
	}
}

// logWriter writes to the test's log.
type logWriter struct{ t *testing.T }

func (w *logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}
