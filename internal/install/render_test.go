package install

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainyard/trainyard/internal/workload"
)

// typed converts a rendered object into its Go type, refusing fields the type lacks, so
// that a typo in a template fails here rather than on a cluster.
func typed[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, out, true); err != nil {
		t.Fatalf("%s: %v", Ref(obj), err)
	}
	return out
}

// find returns the rendered object of a kind.
func find(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == kind {
			return obj
		}
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}

func TestRenderDefaults(t *testing.T) {
	objs, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, obj := range objs {
		refs = append(refs, Ref(obj))
		if got := obj.GetLabels()[LabelManagedBy]; got != ManagedBy {
			t.Errorf("%s: label %s=%q, want %q", Ref(obj), LabelManagedBy, got, ManagedBy)
		}
		if got := obj.GetLabels()[LabelName]; got != "trainyard" {
			t.Errorf("%s: label %s=%q, want trainyard", Ref(obj), LabelName, got)
		}
	}
	want := []string{
		"namespace/trainyard-system",
		"customresourcedefinition.apiextensions.k8s.io/trainjobs.trainyard.dev",
		"clusterrole.rbac.authorization.k8s.io/trainyard-operator",
		"clusterrole.rbac.authorization.k8s.io/trainyard-operator-metrics-reader",
		"priorityclass.scheduling.k8s.io/trainyard-operator-room-probe",
		"serviceaccount/trainyard-operator",
		"clusterrolebinding.rbac.authorization.k8s.io/trainyard-operator",
		"deployment.apps/trainyard-operator",
	}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Errorf("rendered objects (-want +got):\n%s", diff)
	}

	typed[corev1.Namespace](t, objs[0])
	crd := typed[apiextensionsv1.CustomResourceDefinition](t, find(t, objs, "CustomResourceDefinition"))
	if crd.Spec.Group != "trainyard.dev" || crd.Spec.Names.Kind != "TrainJob" {
		t.Errorf("CRD serves %s %s, want trainyard.dev TrainJob", crd.Spec.Group, crd.Spec.Names.Kind)
	}
	role := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole"))
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, "trainyard.dev") && slices.Contains(r.Resources, "trainjobs")
	}) {
		t.Errorf("the ClusterRole does not grant trainjobs: %+v", role.Rules)
	}
	binding := typed[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding"))
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: Name, Namespace: DefaultNamespace}}
	if diff := cmp.Diff(wantSubjects, binding.Subjects); diff != "" || binding.RoleRef.Name != role.Name {
		t.Errorf("binding of %s (-want +got):\n%s", binding.RoleRef.Name, diff)
	}
	typed[corev1.ServiceAccount](t, find(t, objs, "ServiceAccount"))
}

func TestRenderDeployment(t *testing.T) {
	objs, err := Render(Options{Namespace: "ml-ops", Image: "registry.example.com:5000/team/trainyard:v1.2.3",
		Replicas: 2, PullPolicy: corev1.PullAlways})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Namespace":
			if obj.GetName() != "ml-ops" {
				t.Errorf("namespace %q, want ml-ops", obj.GetName())
			}
		case "ServiceAccount", "Deployment":
			if obj.GetNamespace() != "ml-ops" {
				t.Errorf("%s in namespace %q, want ml-ops", Ref(obj), obj.GetNamespace())
			}
		default:
			if obj.GetNamespace() != "" {
				t.Errorf("%s is cluster-scoped but has namespace %q", Ref(obj), obj.GetNamespace())
			}
		}
	}
	if s := typed[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding")).Subjects; s[0].Namespace != "ml-ops" {
		t.Errorf("binding's subject in namespace %q, want ml-ops", s[0].Namespace)
	}

	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment"))
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d, want 2", *d.Spec.Replicas)
	}
	for k, v := range workload.OperatorPodLabels() {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the operator's pods lack the label %s=%s that the workers' NetworkPolicy admits", k, v)
		}
	}
	if d.Spec.Template.Spec.ServiceAccountName != Name {
		t.Errorf("service account %q, want %q", d.Spec.Template.Spec.ServiceAccountName, Name)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the pod template lacks the selector's label %s=%s", k, v)
		}
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example.com:5000/team/trainyard:v1.2.3" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %q (%s)", c.Image, c.ImagePullPolicy)
	}
	wantArgs := []string{"operator", "--leader-elect", "--metrics-bind-address", ":8443",
		"--health-probe-bind-address", ":8081", "--image", "registry.example.com:5000/team/trainyard:v1.2.3",
		"--worker-cpu-per-gpu", workload.DefaultCPUPerGPU, "--worker-memory-per-gpu", workload.DefaultMemoryPerGPU, "--pod-policy", "restricted",
		"--room-probe-priority-class", "trainyard-operator-room-probe"}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes %s and %s, want /healthz and /readyz", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if diff := cmp.Diff(map[string]int32{"metrics": 8443, "health": 8081}, ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("no CPU or memory request: %v", c.Resources.Requests)
	}
	sc := c.SecurityContext
	if sc == nil || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v: want non-root, read-only root, no privilege escalation", sc)
	}
	if psc := d.Spec.Template.Spec.SecurityContext; psc == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod security context %+v: want runAsNonRoot", psc)
	}
}

// An operator that watches one namespace gets Roles: the namespaced rules in that
// namespace, Leases (and their Events) in its own, and a ClusterRole of what is
// cluster-wide only; every generated rule is granted somewhere.
func TestRenderWatchNamespace(t *testing.T) {
	objs, err := Render(Options{Namespace: "ops", WatchNamespace: "team-a", PodPolicy: "off", APIServerCIDRs: []string{"10.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	byRef := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		ref := obj.GetNamespace() + ":" + Ref(obj)
		refs = append(refs, ref)
		byRef[ref] = obj
	}
	want := []string{
		":namespace/ops",
		":customresourcedefinition.apiextensions.k8s.io/trainjobs.trainyard.dev",
		":clusterrole.rbac.authorization.k8s.io/trainyard-operator",
		"team-a:role.rbac.authorization.k8s.io/trainyard-operator",
		"ops:role.rbac.authorization.k8s.io/trainyard-operator-leader-election",
		":clusterrole.rbac.authorization.k8s.io/trainyard-operator-metrics-reader",
		":priorityclass.scheduling.k8s.io/trainyard-operator-room-probe",
		"ops:serviceaccount/trainyard-operator",
		":clusterrolebinding.rbac.authorization.k8s.io/trainyard-operator",
		"team-a:rolebinding.rbac.authorization.k8s.io/trainyard-operator",
		"ops:rolebinding.rbac.authorization.k8s.io/trainyard-operator-leader-election",
		"ops:deployment.apps/trainyard-operator",
	}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Fatalf("rendered objects (-want +got):\n%s", diff)
	}
	resources := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rules {
			out = append(out, r.Resources...)
		}
		slices.Sort(out)
		return out
	}
	cluster := typed[rbacv1.ClusterRole](t, byRef[":clusterrole.rbac.authorization.k8s.io/trainyard-operator"])
	if diff := cmp.Diff([]string{"endpointslices", "nodes", "priorityclasses", "resourceflavors", "subjectaccessreviews", "tokenreviews"}, resources(cluster.Rules)); diff != "" {
		t.Errorf("the ClusterRole of a namespaced operator grants more than what is cluster-wide (-want +got):\n%s", diff)
	}
	watched := typed[rbacv1.Role](t, byRef["team-a:role.rbac.authorization.k8s.io/trainyard-operator"])
	for _, r := range []string{"trainjobs", "pods", "services", "secrets", "networkpolicies", "deployments", "events", "workloads"} {
		if !slices.Contains(resources(watched.Rules), r) {
			t.Errorf("the watched namespace's Role lacks %s: %v", r, resources(watched.Rules))
		}
	}
	if slices.Contains(resources(watched.Rules), "nodes") || slices.Contains(resources(watched.Rules), "leases") {
		t.Errorf("the watched namespace's Role grants nodes or leases: %v", resources(watched.Rules))
	}
	election := typed[rbacv1.Role](t, byRef["ops:role.rbac.authorization.k8s.io/trainyard-operator-leader-election"])
	if diff := cmp.Diff([]string{"events", "leases"}, resources(election.Rules)); diff != "" {
		t.Errorf("the election Role (-want +got):\n%s", diff)
	}
	full, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := resources(typed[rbacv1.ClusterRole](t, find(t, full, "ClusterRole")).Rules)
	split := slices.Compact(slices.Sorted(slices.Values(append(append(resources(cluster.Rules), resources(watched.Rules)...), resources(election.Rules)...))))
	if diff := cmp.Diff(slices.Compact(all), split); diff != "" {
		t.Errorf("the split loses or adds rules (-cluster-wide +split):\n%s", diff)
	}
	for _, ref := range []string{"team-a:rolebinding.rbac.authorization.k8s.io/trainyard-operator", "ops:rolebinding.rbac.authorization.k8s.io/trainyard-operator-leader-election"} {
		b := typed[rbacv1.RoleBinding](t, byRef[ref])
		if b.RoleRef.Kind != "Role" || b.RoleRef.Name != b.Name || b.Subjects[0].Name != Name || b.Subjects[0].Namespace != "ops" {
			t.Errorf("%s: %+v", ref, b)
		}
	}
	c := typed[appsv1.Deployment](t, byRef["ops:deployment.apps/trainyard-operator"]).Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff([]string{"--pod-policy", "off", "--namespace", "team-a", "--api-server-cidr", "10.0.0.1/32",
		"--room-probe-priority-class", "trainyard-operator-room-probe"}, c.Args[len(c.Args)-8:]); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	pc := typed[schedulingv1.PriorityClass](t, byRef[":priorityclass.scheduling.k8s.io/trainyard-operator-room-probe"])
	if pc.Value != 0 || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptNever || pc.GlobalDefault {
		t.Errorf("the room probes' PriorityClass: value %d, policy %v, global default %v; want 0, Never, false", pc.Value, pc.PreemptionPolicy, pc.GlobalDefault)
	}
	reader := typed[rbacv1.ClusterRole](t, byRef[":clusterrole.rbac.authorization.k8s.io/trainyard-operator-metrics-reader"])
	if len(reader.Rules) != 1 || reader.Rules[0].NonResourceURLs[0] != "/metrics" || reader.Rules[0].Verbs[0] != "get" {
		t.Errorf("the metrics reader's rules %+v", reader.Rules)
	}
}

func TestRenderYAML(t *testing.T) {
	opts := Options{Namespace: "ns1", Image: "trainyard:dev"}
	data, err := RenderYAML(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "---\n") {
		t.Errorf("YAML does not start with ---:\n%.200s", data)
	}
	back, err := decodeObjects(data)
	if err != nil {
		t.Fatalf("read back the YAML: %v", err)
	}
	objs, err := Render(opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(objs, back); diff != "" {
		t.Errorf("YAML read back (-rendered +read):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		opts Options
		want string // in the error; empty: valid
	}{
		"zero value":             {},
		"image with digest":      {opts: Options{Image: "ghcr.io/trainyard/trainyard@sha256:" + strings.Repeat("a", 64)}},
		"image without registry": {opts: Options{Image: "trainyard"}},
		"registry with port":     {opts: Options{Image: "localhost:5000/trainyard:v1"}},
		"namespace upper case":   {opts: Options{Namespace: "Trainyard"}, want: `--namespace: "Trainyard" is not a valid namespace name`},
		"namespace underscore":   {opts: Options{Namespace: "train_yard"}, want: "--namespace"},
		"namespace too long":     {opts: Options{Namespace: strings.Repeat("a", 64)}, want: "--namespace"},
		"image upper case":       {opts: Options{Image: "ghcr.io/Trainyard/trainyard:v1"}, want: "--image: \"ghcr.io/Trainyard/trainyard:v1\" is not an image reference like ghcr.io/trainyard/trainyard:v1.2.3: repository names are lower case"},
		"image with space":       {opts: Options{Image: "trainyard: v1"}, want: "it has white space"},
		"image empty tag":        {opts: Options{Image: "trainyard:"}, want: "--image"},
		"image bad digest":       {opts: Options{Image: "trainyard@sha256:abc"}, want: "--image"},
		"replicas":               {opts: Options{Replicas: -1}, want: "--replicas: -1: must be at least 1"},
		"pull policy":            {opts: Options{PullPolicy: "Sometimes"}, want: `--image-pull-policy: "Sometimes": must be Always, IfNotPresent or Never`},
		"watch namespace":        {opts: Options{WatchNamespace: "Team_A"}, want: `--watch-namespace: "Team_A" is not a valid namespace name`},
		"pod policy":             {opts: Options{PodPolicy: "baseline"}, want: `--pod-policy: "baseline": use restricted`},
		"pod policy off":         {opts: Options{PodPolicy: "off"}},
		"api server cidr":        {opts: Options{APIServerCIDRs: []string{"10.0.0.1"}}, want: `--api-server-cidr: "10.0.0.1": not a CIDR`},
		"requests per GPU":       {opts: Options{WorkerCPUPerGPU: "100m", WorkerMemoryPerGPU: "64Mi"}},
		"no requests per GPU":    {opts: Options{WorkerCPUPerGPU: "0", WorkerMemoryPerGPU: "0"}},
		"a room probe image":     {opts: Options{RoomProbeImage: "localhost/pause:1"}},
		"a bad room probe image": {opts: Options{RoomProbeImage: "Pause"}, want: `--room-probe-image: "Pause" is not an image reference`},
		"CPU per GPU":            {opts: Options{WorkerCPUPerGPU: "-2"}, want: `--worker-cpu-per-gpu: "-2": must not be negative`},
		"memory per GPU":         {opts: Options{WorkerMemoryPerGPU: "lots"}, want: `--worker-memory-per-gpu: "lots" is not an amount such as 8Gi`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.opts.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error with %q", err, tc.want)
			}
			if _, rerr := Render(tc.opts); (rerr == nil) != (err == nil) {
				t.Errorf("Render: %v, Validate: %v", rerr, err)
			}
		})
	}
}

// A room probe image given to install reaches the operator's arguments.
func TestRenderRoomProbeImage(t *testing.T) {
	objs, err := Render(Options{RoomProbeImage: "localhost/pause:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		if want := []string{"--room-probe-image", "localhost/pause:1"}; !slices.Equal(args[len(args)-2:], want) {
			t.Errorf("operator args %q, want them to end with %q", args, want)
		}
		return
	}
	t.Fatal("no Deployment rendered")
}

func TestDefaultImage(t *testing.T) {
	cases := map[string]string{
		"v1.2.3":            "ghcr.io/trainyard/trainyard:v1.2.3",
		"v0.10.0-rc.1":      "ghcr.io/trainyard/trainyard:v0.10.0-rc.1",
		"v1.2.3-4-gabcdef0": "ghcr.io/trainyard/trainyard:latest", // git describe: not released
		"9e15ec3-dirty":     "ghcr.io/trainyard/trainyard:latest",
		"dev":               "ghcr.io/trainyard/trainyard:latest",
		"":                  "ghcr.io/trainyard/trainyard:latest",
		"not a tag":         "ghcr.io/trainyard/trainyard:latest",
	}
	for version, want := range cases {
		if got := DefaultImage(version); got != want {
			t.Errorf("DefaultImage(%q) = %q, want %q", version, got, want)
		}
	}
}
