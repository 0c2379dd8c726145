package cluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/internal/testcluster"
	"github.com/trainyard/trainyard/internal/testgit"
)

// nodeAddr is the node's address on the pods' bridge, where pods reach the host.
const nodeAddr = "10.244.0.1"

// dataClaim makes a PersistentVolume on a host folder and the claim NAME bound to it: the
// data volume of Arena's --data NAME:PATH.
func dataClaim(t *testing.T, ctx context.Context, name, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	empty := ""
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name + "-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              empty,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		}}
	if _, err := cl.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty, VolumeName: pv.Name,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := cl.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Client.CoreV1().PersistentVolumeClaims("default").Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = cl.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
}

// Arena's command line with our binary, on real pods: the example's code is cloned by the
// init container from a private repository the test serves over HTTP on the node's
// address, the data claim is mounted at /mnist_data and holds the run folder, the job
// trains to the end, and its TensorBoard Deployment and Service are created.
func testArena(t *testing.T, ctx context.Context) {
	t.Run("Arena's command line", func(t *testing.T) {
		example, err := os.ReadFile(filepath.Join("..", "..", "examples", "fashion-mnist", "train.py"))
		if err != nil {
			t.Fatal(err)
		}
		repo := testgit.New(t, "mnist-pytorch", map[string]string{"mnist.py": string(example)})
		tip := repo.Commit("main", "second", map[string]string{"README": "Fashion-MNIST\n"})
		url := repo.Serve(nodeAddr+":0", "alice", "s3cret")
		data := filepath.Join(sharedDir, "training-data")
		dataClaim(t, ctx, "training-data", data)
		t.Setenv("GIT_SYNC_USERNAME", "alice")
		t.Setenv("GIT_SYNC_PASSWORD", "s3cret")

		code, out, errOut := trainyardCmd(t, ctx, "submit", "--kube", "--name=pytorch-dist", "--workers=2", "--working-dir=/root",
			"--image="+testcluster.WorkerImage, "--image-pull-policy=IfNotPresent", "--sync-mode=git", "--sync-source="+url,
			"--data=training-data:/mnist_data", "--storage-path=/mnist_data/runs", "--tensorboard",
			"--", "python3", "/root/code/mnist-pytorch/mnist.py", "--epochs", "1", "--train-subset", "2000", "--test-subset", "500")
		if code != 0 {
			t.Fatalf("submit: exit %d\n%s%s", code, out, errOut)
		}
		s := waitStatus(t, "pytorch-dist", 5*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" || s.Iteration != 1 {
			_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "pytorch-dist")
			t.Fatalf("status %+v, want Succeeded at iteration 1\n%s", s, logs)
		}
		raw, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs", "pytorch-dist").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var tj struct {
			Status struct {
				SourceCommit string `json:"sourceCommit"`
				RunDir       string `json:"runDir"`
			} `json:"status"`
		}
		_ = json.Unmarshal(raw, &tj)
		if tj.Status.SourceCommit != tip {
			t.Errorf("status.sourceCommit %q, want %s", tj.Status.SourceCommit, tip)
		}
		run := filepath.Join(data, strings.TrimPrefix(tj.Status.RunDir, "/mnist_data/"))
		if _, err := os.Stat(filepath.Join(run, "run.json")); err != nil {
			t.Errorf("the run folder is not on the data claim: %v", err)
		}
		pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "trainyard.dev/job-name=pytorch-dist"})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("the job's pods: %v", err)
		}
		if init := pods.Items[0].Status.InitContainerStatuses; len(init) != 1 || init[0].State.Terminated == nil ||
			init[0].State.Terminated.Message != "commit "+tip {
			t.Errorf("the init container's status %+v", init)
		}
		if _, err := cl.Client.AppsV1().Deployments("default").Get(ctx, "pytorch-dist-tensorboard", metav1.GetOptions{}); err != nil {
			t.Errorf("the TensorBoard Deployment: %v", err)
		}
		if _, err := cl.Client.CoreV1().Services("default").Get(ctx, "pytorch-dist-tensorboard", metav1.GetOptions{}); err != nil {
			t.Errorf("the TensorBoard Service: %v", err)
		}
		_, out, _ = trainyardCmd(t, ctx, "get", "--kube", "pytorch-dist")
		for _, want := range []string{tip, "kubectl port-forward -n default svc/pytorch-dist-tensorboard 6006:6006"} {
			if !strings.Contains(out, want) {
				t.Errorf("get lacks %q:\n%s", want, out)
			}
		}
		t.Logf("get --kube pytorch-dist:\n%s", out)
		arenaFollowUps(t, ctx)
		if code, _, _ := trainyardCmd(t, ctx, "delete", "--kube", "pytorch-dist"); code != 0 {
			t.Errorf("delete: exit %d", code)
		}
	})
}

// arenaFollowUps runs what the README's Arena section shows after the submit (arena list,
// logs, top job, data list with our binary) on the finished job, and checks what each
// prints.
func arenaFollowUps(t *testing.T, ctx context.Context) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"list", "--kube"}, []string{"NODE", "pytorch-dist", "Succeeded", testcluster.NodeName}},
		{[]string{"logs", "--kube", "pytorch-dist"}, []string{"epoch 1/1"}}, // worker 0's pod: rank 0
		{[]string{"logs", "--kube", "pytorch-dist", "-i", "worker-1", "--timestamps"}, []string{"Z "}},
		{[]string{"top", "job", "--kube"}, []string{"GPU(Requested)", "pytorch-dist", "Total Allocated/Requested GPUs of Training Jobs"}},
		{[]string{"data", "list", "--kube"}, []string{"training-data", "Bound", "1Gi", "RWX"}},
	} {
		code, out, errOut := trainyardCmd(t, ctx, c.args...)
		t.Logf("trainyard %s:\n%s", strings.Join(c.args, " "), out)
		if code != 0 {
			t.Errorf("trainyard %s: exit %d: %s", strings.Join(c.args, " "), code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("trainyard %s lacks %q", strings.Join(c.args, " "), w)
			}
		}
	}
	if _, out, _ := trainyardCmd(t, ctx, "logs", "--kube", "pytorch-dist", "-t", "2"); strings.Count(out, "\n") > 2 {
		t.Errorf("logs -t 2 printed %d lines:\n%s", strings.Count(out, "\n"), out)
	}
}
