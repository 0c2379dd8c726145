package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/trainyard/trainyard/internal/testcluster"
)

// sharedClaimOnce makes the claim "shared" once per test run.
var sharedClaimOnce sync.Mutex

// sharedClaim makes, once, the PersistentVolumeClaim "shared" of namespace default, bound
// to a hostPath PersistentVolume on sharedDir: how an administrator gives the workers a
// host folder, since the operator's pod policy refuses hostPath volumes in TrainJobs.
// It stays until the cluster goes.
func sharedClaim(t *testing.T, ctx context.Context) {
	t.Helper()
	sharedClaimOnce.Lock()
	defer sharedClaimOnce.Unlock()
	if _, err := cl.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "shared", metav1.GetOptions{}); err == nil {
		return
	}
	if err := os.MkdirAll(sharedDir, 0o777); err != nil {
		t.Fatal(err)
	}
	empty := ""
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "trainyard-test-shared"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              empty,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: sharedDir,
				Type: ptr(corev1.HostPathDirectoryOrCreate)}},
		}}
	if _, err := cl.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty, VolumeName: pv.Name,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}
	if _, err := cl.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// escapeJob is the TrainJob of the security issue: privileged, the host's network and
// PIDs, its root folder, kube-proxy's service account.
const escapeJob = `apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata: {name: escape}
spec:
  command: [python3, -c, "print('escaped')"]
  kubernetes:
    image: ` + testcluster.WorkerImage + `
    imagePullPolicy: IfNotPresent
    podTemplate:
      spec:
        hostNetwork: true
        hostPID: true
        serviceAccountName: kube-proxy
        containers: [{name: worker, securityContext: {privileged: true}, volumeMounts: [{name: host, mountPath: /host}]}]
        volumes: [{name: host, hostPath: {path: /}}]
`

// The operator's pod policy on a real cluster: submit --kube refuses the issue's
// privileged TrainJob (exit 2, nothing created); created anyway, as kubectl would, it
// fails with PodPolicyViolation naming the fields and no pod runs. A gang trains to the
// end with the hardened defaults (its worker's process has no capabilities, no new
// privileges and the runtime's seccomp filter, under containerd 1.6 and runc) and its
// NetworkPolicy present, selecting its pods. (The bridge CNI of the test cluster does
// not enforce NetworkPolicies: what they admit is tested on the rendered objects.)
func TestPodPolicyOnRealPods(t *testing.T) {
	cluster(t)
	installOperator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	t.Run("a privileged TrainJob is refused", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "escape.yaml")
		if err := os.WriteFile(file, []byte(escapeJob), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := trainyardCmd(t, ctx, "submit", "--kube", "-f", file)
		if code != 2 || !strings.Contains(errOut, "spec.kubernetes.podTemplate.spec.containers[0].securityContext.privileged") {
			t.Fatalf("submit: exit %d\n%s%s; want 2 naming the field", code, out, errOut)
		}
		if _, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs", "escape").
			DoRaw(ctx); !apierrors.IsNotFound(err) {
			t.Fatalf("after a refused submit, TrainJob escape: %v", err)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// As kubectl apply would create it.
		if err := cl.Client.CoreV1().RESTClient().Post().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs").
			SetHeader("Content-Type", "application/yaml").Body(data).Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
		s := waitStatus(t, "escape", time.Minute, func(s trainJobStatus) bool { return s.Phase == "Failed" })
		if !s.hasReason("PodPolicyViolation") {
			t.Errorf("status %+v, want Failed with PodPolicyViolation", s)
		}
		for _, f := range []string{"spec.kubernetes.podTemplate.spec.hostNetwork", "spec.kubernetes.podTemplate.spec.hostPID",
			"spec.kubernetes.podTemplate.spec.serviceAccountName", "spec.kubernetes.podTemplate.spec.volumes[0].hostPath"} {
			if !strings.Contains(s.Reason, f) {
				t.Errorf("the reason does not name %s: %s", f, s.Reason)
			}
		}
		_, out, _ = trainyardCmd(t, ctx, "get", "--kube", "escape")
		if !strings.Contains(out, "PodPolicyViolation") {
			t.Errorf("get --kube lacks the event:\n%s", out)
		}
		time.Sleep(3 * time.Second)
		pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "trainyard.dev/job-name=escape"})
		if err != nil || len(pods.Items) != 0 {
			t.Errorf("pods of the refused job: %d, %v", len(pods.Items), err)
		}
		trainyardCmd(t, ctx, "delete", "--kube", "escape")
	})

	t.Run("a gang trains hardened under its NetworkPolicy", func(t *testing.T) {
		job{name: "fenced", args: []string{"--epochs", "2", "--train-subset", "3000", "--test-subset", "500", "--sleep-per-step", "0.05"}}.submit(t, ctx)
		waitStatus(t, "fenced", 5*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		np, err := cl.Client.NetworkingV1().NetworkPolicies("default").Get(ctx, "fenced-workers", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the gang's NetworkPolicy: %v", err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		pod := workerPod(t, ctx, "fenced", 1)
		p, err := cl.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(p.Labels)) {
			t.Errorf("the NetworkPolicy's selector %s does not select the worker pod (labels %v)", sel, p.Labels)
		}
		status, err := cl.Exec(ctx, "default", pod, "worker", "cat", "/proc/1/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(status, want) {
				t.Errorf("the worker's /proc/1/status lacks %q:\n%s", want, status)
			}
		}
		s := waitStatus(t, "fenced", 5*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" || s.Iteration != 2 {
			_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "--all-ranks", "fenced")
			t.Errorf("status %+v, want Succeeded at iteration 2\n%s", s, logs)
		}
		trainyardCmd(t, ctx, "delete", "--kube", "fenced")
	})
}
