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
			a, err := Render(job, 2, Options{Image: "ghcr.io/trainyard/trainyard:v0.1.0"})
			if err != nil {
				t.Fatal(err)
			}
			objs := []any{a.Job, a.Service}
			tb, err := RenderTensorBoard(job)
			if err != nil {
				t.Fatal(err)
			}
			if tb != nil {
				objs = append(objs, tb.Deployment, tb.Service)
			}
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
	pod := a.Job.Spec.Template.Spec
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
	if *a.Job.Spec.Suspend != true || a.Job.Labels[LabelQueue] != "team-a" {
		t.Error("a job with a queue name must be created suspended and labelled for Kueue")
	}
	if pod.Subdomain != a.Service.Name || a.Service.Spec.ClusterIP != corev1.ClusterIPNone || !a.Service.Spec.PublishNotReadyAddresses {
		t.Error("the pods' subdomain must be the headless Service publishing not-ready addresses")
	}

	cpu, err := Render(baseJob(), 1, Options{Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if env := envMap(cpu.Job.Spec.Template.Spec.Containers[0].Env); env["NVIDIA_VISIBLE_DEVICES"] != "void" {
		t.Error("a worker without GPUs must get NVIDIA_VISIBLE_DEVICES=void")
	}
	if !cpu.EphemeralStorage || cpu.Job.Spec.Suspend != nil {
		t.Error("no volume at the storage path must be reported as ephemeral; no queue, not suspended")
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

func TestRenderBadOverride(t *testing.T) {
	for name, raw := range map[string]string{
		"unknown field": `{"spec": {"hostIPCC": true}}`,
		"wrong type":    `{"spec": {"containers": "worker"}}`,
	} {
		j := baseJob()
		j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(raw)}
		_, err := Render(j, 1, Options{Image: "img"})
		if err == nil || !strings.Contains(err.Error(), "spec.kubernetes.podTemplate") {
			t.Errorf("%s: err = %v, want one naming spec.kubernetes.podTemplate", name, err)
		}
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
