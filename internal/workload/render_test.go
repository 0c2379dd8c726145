package workload

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func baseJob() *v1.TrainJob {
	return &v1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ml", UID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
		Spec: v1.TrainJobSpec{
			Workers:    ptr(int32(2)),
			Command:    []string{"python3", "train.py"},
			Args:       []string{"--epochs", "3"},
			Kubernetes: &v1.KubernetesSpec{Image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"},
		},
	}
}

func gpuJob() *v1.TrainJob {
	j := baseJob()
	j.Name = "llm"
	j.Spec.Workers = ptr(int32(4))
	j.Spec.Resources = v1.WorkerResources{CPU: ptr(resource.MustParse("8")), Memory: ptr(resource.MustParse("64Gi")), GPU: 8}
	j.Spec.StoragePath = "/mnt/runs"
	j.Spec.MaxRestarts = 3
	j.Spec.Kubernetes = &v1.KubernetesSpec{
		Image:              "registry.example.com/llm:1",
		ImagePullPolicy:    corev1.PullAlways,
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "regcred"}},
		ServiceAccountName: "trainer",
		NodeSelector:       map[string]string{"gpu": "h100"},
		Tolerations:        []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}},
		PriorityClassName:  "high",
		QueueName:          "team-a",
		Volumes: []corev1.Volume{{Name: "runs", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "runs"}}}},
		VolumeMounts:   []corev1.VolumeMount{{Name: "runs", MountPath: "/mnt"}},
		PodAnnotations: map[string]string{"gke-gcsfuse/volumes": "true"},
	}
	return j
}

// arenaJob is Arena's example as `trainyard submit --kube` builds it: code cloned from a
// private repository, a data volume, a TensorBoard reading a folder on it, and Arena's
// pod labels and annotations. Attempt 2 checks out the commit the first attempt cloned.
func arenaJob() *v1.TrainJob {
	j := baseJob()
	j.Name = "pytorch-dist"
	j.Spec.Workers = ptr(int32(3))
	j.Spec.Resources.GPU = 1
	j.Spec.Command = []string{"python", "/root/code/mnist-pytorch/mnist.py"}
	j.Spec.Args = []string{"--epochs", "10", "--backend", "nccl", "--data", "/mnist_data/pytorch_data/"}
	j.Spec.Source = &v1.SourceSpec{Git: &v1.GitSource{URL: "https://git.example.com/team/mnist-pytorch.git", Branch: "main",
		CredentialsSecret: "trainyard-git-x7k2p"}}
	j.Status.SourceCommit = "0123456789abcdef0123456789abcdef01234567"
	k := j.Spec.Kubernetes
	k.Volumes = []corev1.Volume{{Name: "data-training-data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "training-data"}}}}
	k.VolumeMounts = []corev1.VolumeMount{{Name: "data-training-data", MountPath: "/mnist_data"}}
	k.TensorBoard = &v1.TensorBoardSpec{LogDir: "/mnist_data/pytorch_data/logs"}
	k.PodLabels = map[string]string{"team": "vision", LabelJob: "not-this"}
	k.PodAnnotations = map[string]string{"note": "arena"}
	k.PriorityClassName = "high"
	return j
}

func TestRenderGolden(t *testing.T) {
	override := baseJob()
	override.Name = "patched"
	override.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(`{
		"metadata": {"labels": {"team": "vision"}},
		"spec": {"hostIPC": true, "containers": [{"name": "worker", "securityContext": {"runAsUser": 1000}}]}}`)}
	for name, job := range map[string]*v1.TrainJob{"cpu": baseJob(), "gpu": gpuJob(), "override": override, "arena": arenaJob()} {
		t.Run(name, func(t *testing.T) {
			a, err := Render(job, 2, Options{Image: "ghcr.io/trainyard/trainyard:v0.1.0", PerGPU: DefaultPerGPU()})
			if err != nil {
				t.Fatal(err)
			}
			objs := []any{a.Service, a.Pod(0)}
			tb, err := RenderTensorBoard(job)
			if err != nil {
				t.Fatal(err)
			}
			if tb != nil {
				objs = append(objs, tb.Deployment, tb.Service, RenderTensorBoardNetworkPolicy(job, goldenNetwork))
			}
			objs = append(objs, RenderNetworkPolicy(job, goldenNetwork))
			var b strings.Builder
			for _, obj := range objs {
				data, err := yaml.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				b.WriteString("---\n")
				b.Write(data)
			}
			golden(t, filepath.Join("testdata", name+".yaml"), b.String())
		})
	}
}

// goldenNetwork is an operator in trainyard-system, on a cluster whose API server connects
// from 192.0.2.10.
var goldenNetwork = Network{OperatorNamespace: "trainyard-system", APIServerCIDRs: []string{"192.0.2.10/32"}}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the rendering (go test ./internal/workload -update rewrites it):\n%s", path, got)
	}
}

func TestRenderWiring(t *testing.T) {
	a, err := Render(gpuJob(), 3, Options{Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	pod := a.Template.Spec
	w := pod.Containers[0]
	if got := w.Resources.Limits[GPUResource]; got.Value() != 8 {
		t.Errorf("GPU limit = %v, want 8", got.String())
	}
	if got := w.Resources.Requests[GPUResource]; got.Value() != 8 {
		t.Errorf("GPU request = %v, want 8", got.String())
	}
	if !hasToleration(pod.Tolerations, string(GPUResource)) || !hasToleration(pod.Tolerations, "dedicated") {
		t.Errorf("tolerations = %v, want the user's and nvidia.com/gpu", pod.Tolerations)
	}
	env := envMap(w.Env)
	if env[EnvMasterAddr] != "llm-a3-0.llm-a3" || env[EnvMasterPort] != "29500" || env[EnvAttempt] != "3" {
		t.Errorf("rendezvous env = %v", env)
	}
	if _, ok := env["NVIDIA_VISIBLE_DEVICES"]; ok {
		t.Error("a worker with GPUs must not hide them")
	}
	if a.EphemeralStorage {
		t.Error("the storage path /mnt/runs is under the PVC mount /mnt, yet rendered as ephemeral")
	}
	p := a.Pod(2)
	if p.Name != "llm-a3-2" || p.Spec.Hostname != p.Name || p.Labels[LabelWorkerIndex] != "2" || envMap(p.Spec.Containers[0].Env)[EnvWorker] != "2" {
		t.Errorf("pod 2: name %s, hostname %s, labels %v: want llm-a3-2 as both, index 2 in the label and %s", p.Name, p.Spec.Hostname, p.Labels, EnvWorker)
	}
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Name != "llm" || p.Namespace != a.Service.Namespace {
		t.Errorf("pod 2: owners %v in %q: want the TrainJob, in its namespace", p.OwnerReferences, p.Namespace)
	}
	if _, ok := envMap(pod.Containers[0].Env)[EnvWorker]; ok || a.Template.Labels[LabelWorkerIndex] != "" {
		t.Error("the template itself must not carry a worker index")
	}
	if pod.Subdomain != a.Service.Name || a.Service.Spec.ClusterIP != corev1.ClusterIPNone || !a.Service.Spec.PublishNotReadyAddresses {
		t.Error("the pods' subdomain must be the headless Service publishing not-ready addresses")
	}

	cpu, err := Render(baseJob(), 1, Options{Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if env := envMap(cpu.Template.Spec.Containers[0].Env); env["NVIDIA_VISIBLE_DEVICES"] != "void" {
		t.Error("a worker without GPUs must get NVIDIA_VISIBLE_DEVICES=void")
	}
	if !cpu.EphemeralStorage || len(cpu.Pods()) != 2 {
		t.Errorf("no volume at the storage path must be reported as ephemeral; %d pods, want 2", len(cpu.Pods()))
	}
	d := Defaulted(baseJob())
	if d.Spec.RunName != "mnist-0f1e2d3c" || d.Spec.StoragePath != DefaultStoragePath {
		t.Errorf("defaults: run name %q, storage %q", d.Spec.RunName, d.Spec.StoragePath)
	}
}

func TestTensorBoardNeedsAVolume(t *testing.T) {
	j := baseJob()
	j.Spec.Kubernetes.TensorBoard = &v1.TensorBoardSpec{}
	_, err := RenderTensorBoard(j)
	if err == nil || !strings.Contains(err.Error(), "TensorBoard reads /trainyard/results/mnist-0f1e2d3c, which no volume of the workers holds") {
		t.Errorf("RenderTensorBoard without a volume = %v", err)
	}
	if tb, err := RenderTensorBoard(baseJob()); tb != nil || err != nil {
		t.Errorf("a job without tensorboard renders %v, %v", tb, err)
	}
}

// A pod template that is not one is refused with an error naming its field, before the
// merge: a container whose name is a list made strategic merge panic (in submit --kube
// --dry-run=client, and in every reconcile of such a job).
func TestRenderBadOverride(t *testing.T) {
	for name, tc := range map[string]struct{ raw, field string }{
		"unknown field":         {`{"spec": {"hostIPCC": true}}`, `unknown field "spec.hostIPCC"`},
		"wrong type":            {`{"spec": {"containers": "worker"}}`, "spec.containers of type []v1.Container"},
		"a list as a name":      {`{"spec": {"containers": [{"name": []}]}}`, "spec.containers.name of type string"},
		"a number as a name":    {`{"spec": {"initContainers": [{"name": 5}]}}`, "spec.initContainers.name of type string"},
		"a container unnamed":   {`{"spec": {"containers": [{"image": "x"}]}}`, "spec.containers[0].name: required"},
		"a volume unnamed":      {`{"spec": {"volumes": [{"emptyDir": {}}]}}`, "spec.volumes[0].name: required"},
		"not an object":         {`[{"spec": {}}]`, "must be an object"},
		"a privileged string":   {`{"spec": {"containers": [{"name": "worker", "securityContext": {"privileged": "yes"}}]}}`, "securityContext.privileged of type bool"},
		"a null name in a list": {`{"spec": {"containers": [{"name": null}]}}`, "spec.containers[0].name: required"},
	} {
		t.Run(name, func(t *testing.T) {
			j := baseJob()
			j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(tc.raw)}
			_, err := Render(j, 1, Options{Image: "img"})
			if err == nil || !strings.Contains(err.Error(), "spec.kubernetes.podTemplate") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("err = %v, want one naming spec.kubernetes.podTemplate and %q", err, tc.field)
			}
		})
	}
	// Strategic merge's directives are no fields.
	j := baseJob()
	j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(`{"spec": {"tolerations": [{"$patch": "replace"}],
		"containers": [{"name": "worker", "$setElementOrder/env": [{"name": "A"}], "env": [{"name": "A", "value": "1"}]}]}}`)}
	if _, err := Render(j, 1, Options{Image: "img"}); err != nil {
		t.Errorf("a template with merge directives: %v", err)
	}
}

// Every container runs without privilege escalation or capabilities, under the runtime's
// seccomp profile, and workers get no API credentials; a pod template may add to that,
// but not take Trainyard's labels, which the NetworkPolicy and the operator select by.
func TestRenderHardened(t *testing.T) {
	j := arenaJob()
	j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(`{"metadata": {"labels": {"trainyard.dev/job-uid": "another", "x": "y"}},
		"spec": {"containers": [{"name": "worker", "securityContext": {"runAsUser": 1000}}]}}`)}
	a, err := Render(j, 1, Options{Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := RenderTensorBoard(j)
	if err != nil {
		t.Fatal(err)
	}
	for name, pod := range map[string]corev1.PodSpec{"worker": a.Template.Spec, "tensorboard": tb.Deployment.Spec.Template.Spec} {
		if sc := pod.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s pod securityContext %+v, want seccomp RuntimeDefault", name, sc)
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("%s pod mounts a service account token", name)
		}
		for _, c := range append(pod.InitContainers, pod.Containers...) {
			sc := c.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
				len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
				t.Errorf("%s container %s securityContext %+v, want no privilege escalation and capabilities ALL dropped", name, c.Name, sc)
			}
		}
	}
	w := a.Template.Spec.Containers[0].SecurityContext
	if w.RunAsUser == nil || *w.RunAsUser != 1000 {
		t.Errorf("the template's runAsUser was lost: %+v", w)
	}
	if l := a.Template.Labels; l[LabelJobUID] != string(j.UID) || l["x"] != "y" {
		t.Errorf("pod labels %v: want the template's x=y and Trainyard's own job-uid", l)
	}
}

// The workers' NetworkPolicy admits the gang's own pods on every port, and the operator's
// pods and the API server on the progress port only; TensorBoard's admits the API server
// on its port only. Without an operator pod or API server addresses, their rules go.
func TestRenderNetworkPolicies(t *testing.T) {
	j := baseJob()
	np := RenderNetworkPolicy(j, goldenNetwork)
	if np.Name != "mnist-workers" || np.Spec.PodSelector.MatchLabels[LabelJobUID] != string(j.UID) || len(np.Spec.PodSelector.MatchLabels) != 1 {
		t.Errorf("name %s, selector %v", np.Name, np.Spec.PodSelector)
	}
	if o := np.OwnerReferences; len(o) != 1 || o[0].UID != j.UID || o[0].Kind != v1.Kind {
		t.Errorf("owner references %+v", o)
	}
	in := np.Spec.Ingress
	if len(in) != 2 || len(in[0].Ports) != 0 || in[0].From[0].PodSelector.MatchLabels[LabelJobUID] != string(j.UID) {
		t.Fatalf("ingress %+v: want the gang on every port first", in)
	}
	if p := in[1].Ports; len(p) != 1 || p[0].Port.IntValue() != ProgressPort || len(in[1].From) != 2 ||
		in[1].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "trainyard-system" ||
		in[1].From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] != "operator" || in[1].From[1].IPBlock.CIDR != "192.0.2.10/32" {
		t.Errorf("the progress rule %+v", in[1])
	}
	if in := RenderNetworkPolicy(j, Network{}).Spec.Ingress; len(in) != 1 {
		t.Errorf("with no operator pod and no API server address: ingress %+v, want the gang's rule only", in)
	}
	tb := RenderTensorBoardNetworkPolicy(j, goldenNetwork)
	if tb.Spec.PodSelector.MatchLabels[LabelTensorBoard] != "mnist" || len(tb.Spec.Ingress) != 1 ||
		tb.Spec.Ingress[0].Ports[0].Port.IntValue() != TensorBoardPort || tb.Spec.Ingress[0].From[0].IPBlock.CIDR != "192.0.2.10/32" {
		t.Errorf("TensorBoard's policy %+v", tb.Spec)
	}
	if tb := RenderTensorBoardNetworkPolicy(j, Network{}); len(tb.Spec.Ingress) != 0 ||
		tb.Spec.PolicyTypes[0] != "Ingress" {
		t.Errorf("TensorBoard's policy without API server addresses %+v: want an empty ingress (nothing admitted)", tb.Spec)
	}
}

func TestSummaryEncode(t *testing.T) {
	s := Summary{Worker: 0, Outcome: "failed", Reason: strings.Repeat("x", 5000), Metrics: map[string]string{"loss": "0.1"}}
	data := s.Encode()
	if len(data) > TerminationLogMax {
		t.Fatalf("encoded %d bytes, more than %d", len(data), TerminationLogMax)
	}
	back, err := DecodeSummary(string(data))
	if err != nil || back.Outcome != "failed" || !strings.HasSuffix(back.Reason, "...") {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func hasToleration(ts []corev1.Toleration, key string) bool {
	for _, t := range ts {
		if t.Key == key {
			return true
		}
	}
	return false
}

func envMap(env []corev1.EnvVar) map[string]string {
	out := map[string]string{}
	for _, e := range env {
		out[e.Name] = e.Value
	}
	return out
}
