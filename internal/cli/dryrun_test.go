package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/install"
	"github.com/trainyard/trainyard/internal/kubecli"
)

// submit --kube --dry-run=client prints the TrainJob alone (what kubectl apply takes), and
// with --show-children what the operator creates for its first attempt, under a
// placeholder UID, with no cluster at all; a --dry-run that is neither client nor server
// is refused.
func TestSubmitKubeDryRunClient(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	args := []string{"submit", "--kube", "--dry-run=client", "-n", "research", "--name", "pytorch-dist",
		"--image", "img:1", "--workers", "3", "--gpus-per-worker", "1", "--", "python", "/root/code/mnist.py", "--epochs", "10"}
	code, out, errOut := trainyard(args...)
	var alone v1.TrainJob
	if code != 0 || strings.Contains(out, "\n---\n") || yaml.UnmarshalStrict([]byte(out), &alone) != nil || alone.Name != "pytorch-dist" {
		t.Fatalf("exit %d, want the TrainJob alone:\n%s%s", code, out, errOut)
	}
	code, out, errOut = trainyard(append([]string{"submit", "--show-children"}, args[1:]...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	docs := strings.Split(out, "\n---\n")
	if len(docs) != 5 {
		t.Fatalf("%d documents, want the TrainJob, the Service and 3 pods:\n%s", len(docs), out)
	}
	var job v1.TrainJob
	var svc corev1.Service
	var pods [3]corev1.Pod
	for i, into := range []any{&job, &svc, &pods[0], &pods[1], &pods[2]} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), into); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, docs[i])
		}
	}
	if job.Name != "pytorch-dist" || job.Namespace != "research" || job.Spec.WorkerCount() != 3 {
		t.Errorf("TrainJob %s/%s with %d workers", job.Namespace, job.Name, job.Spec.WorkerCount())
	}
	for i, p := range pods {
		if want := fmt.Sprintf("pytorch-dist-a1-%d", i); p.Name != want || p.Spec.Hostname != want || p.Spec.Subdomain != "pytorch-dist-a1" {
			t.Errorf("pod %d: %s, host name %s, subdomain %s; want %s under pytorch-dist-a1", i, p.Name, p.Spec.Hostname, p.Spec.Subdomain, want)
		}
	}
	w1 := pods[1]
	pod := w1.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Image != install.DefaultImage(Version) {
		t.Errorf("init containers %+v, want one of %s", pod.InitContainers, install.DefaultImage(Version))
	}
	worker := pod.Containers[0]
	if worker.Image != "img:1" || worker.Resources.Limits.Name("nvidia.com/gpu", "").Value() != 1 {
		t.Errorf("worker container %s with limits %v", worker.Image, worker.Resources.Limits)
	}
	// No --cpus-per-worker or --memory-per-worker: the operator's built-in requests per GPU.
	if r := worker.Resources; r.Requests.Cpu().String() != "2" || r.Requests.Memory().String() != "8Gi" || r.Limits.Cpu().Value() != 0 || r.Limits.Memory().Value() != 0 {
		t.Errorf("worker resources %+v, want requests of 2 CPUs and 8Gi for its GPU, and no CPU or memory limit", r)
	}
	if svc.Name != "pytorch-dist-a1" || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s, cluster IP %q", svc.Name, svc.Spec.ClusterIP)
	}
	if uid := w1.Labels["trainyard.dev/job-uid"]; uid != kubecli.PlaceholderUID || w1.OwnerReferences[0].UID != kubecli.PlaceholderUID {
		t.Errorf("the pod's job-uid label %q and owner UID %q, want the placeholder", uid, w1.OwnerReferences[0].UID)
	}
	if strings.Contains(out, "pytorch-dist-\"") || !strings.Contains(out, `"runName":"pytorch-dist-00000000"`) {
		t.Errorf("the run name ends in a dash, or lacks the placeholder UID:\n%s", out)
	}

	// The flags set the spec, which wins over the defaults.
	code, out, errOut = trainyard(append([]string{"submit", "--show-children", "--cpus-per-worker", "3", "--memory-per-worker", "20Gi"}, args[1:]...)...)
	if docs := strings.Split(out, "\n---\n"); code != 0 || len(docs) != 5 || yaml.UnmarshalStrict([]byte(docs[2]), &pods[0]) != nil {
		t.Fatalf("--cpus-per-worker 3 --memory-per-worker 20Gi: exit %d: %s%s", code, out, errOut)
	}
	if r := pods[0].Spec.Containers[0].Resources; r.Requests.Cpu().String() != "3" || r.Requests.Memory().String() != "20Gi" || r.Limits.Memory().String() != "20Gi" {
		t.Errorf("with --cpus-per-worker 3 --memory-per-worker 20Gi: worker resources %+v", r)
	}

	code, out, errOut = trainyard("submit", "--kube", "--dry-run=client", "--show-children", "-o", "json", "--image", "img:1", "--", "python", "train.py")
	var list struct {
		Kind  string
		Items []struct{ Kind string }
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || list.Kind != "List" || len(list.Items) != 3 ||
		list.Items[0].Kind != "TrainJob" || list.Items[1].Kind != "Service" || list.Items[2].Kind != "Pod" {
		t.Errorf("-o json: exit %d, %v, %s%s", code, err, out, errOut)
	}
	code, _, errOut = trainyard("submit", "--kube", "-o", "yaml", "--image", "img:1", "--", "python", "train.py")
	if code != 2 || !strings.Contains(errOut, "give --dry-run=client") {
		t.Errorf("-o without --dry-run: exit %d, %s", code, errOut)
	}
	// Without Kueue the operator starts 4 and shrinks the gang for workers it cannot place.
	code, out, errOut = trainyard("submit", "--kube", "--dry-run=client", "--workers", "2:4", "--image", "img:1", "--", "python", "train.py")
	if code != 0 || !strings.Contains(out, "minWorkers: 2") || !strings.Contains(out, "workers: 4") {
		t.Errorf("--workers 2:4 on a cluster without a queue: exit %d, %s%s", code, out, errOut)
	}
	code, out, errOut = trainyard("submit", "--kube", "--dry-run=client", "--workers", "2:4", "--queue", "team-a", "--image", "img:1", "--", "python", "train.py")
	if code != 0 || !strings.Contains(out, "minWorkers: 2") || !strings.Contains(out, "workers: 4") || !strings.Contains(out, "queueName: team-a") {
		t.Errorf("--workers 2:4 --queue team-a: exit %d, %s%s", code, out, errOut)
	}
	code, _, errOut = trainyard("submit", "--kube", "--dry-run=maybe", "--image", "img:1", "--", "python", "train.py")
	if code != 2 || !strings.Contains(errOut, "--dry-run=maybe: use --dry-run=client") {
		t.Errorf("--dry-run=maybe: exit %d, %s", code, errOut)
	}
}

// submit --kube --dry-run=client refuses, exit 2, what the operator's pod policy refuses
// (the privileged pod template), and a pod template that panicked the merge;
// --pod-policy=off prints it.
func TestSubmitKubeDryRunPodPolicy(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	file := t.TempDir() + "/job.yaml"
	write := func(podTemplate string) {
		t.Helper()
		if err := os.WriteFile(file, []byte("apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: escape}\n"+
			"spec: {command: [python3, train.py], kubernetes: {image: img:1, podTemplate: "+podTemplate+"}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("{spec: {hostNetwork: true, hostPID: true, serviceAccountName: kube-proxy, volumes: [{name: root, hostPath: {path: /}}], " +
		"containers: [{name: worker, securityContext: {privileged: true}}]}}")
	code, out, errOut := trainyard("submit", "--kube", "--dry-run=client", "-f", file)
	if code != 2 || out != "" || !strings.Contains(errOut, "spec.kubernetes.podTemplate.spec.containers[0].securityContext.privileged") ||
		!strings.Contains(errOut, "spec.kubernetes.podTemplate.spec.volumes[0].hostPath") {
		t.Errorf("a privileged pod template: exit %d, %q, %s; want exit 2 naming the fields", code, out, errOut)
	}
	if code, out, errOut := trainyard("submit", "--kube", "--dry-run=client", "--show-children", "--pod-policy=off", "-f", file); code != 0 || !strings.Contains(out, "hostNetwork: true") {
		t.Errorf("--pod-policy=off: exit %d, %s", code, errOut)
	}
	write("{spec: {containers: [{name: []}]}}")
	code, _, errOut = trainyard("submit", "--kube", "--dry-run=client", "-f", file)
	if code != 2 || !strings.Contains(errOut, "spec.kubernetes.podTemplate") || !strings.Contains(errOut, "spec.containers.name") {
		t.Errorf("a list as a container's name: exit %d, %s; want exit 2 naming the field", code, errOut)
	}
}

// Arena's --data NAME:PATH[:ro] mounts a claim in every worker on a cluster; where the
// workers are plain processes it is refused, saying to use the path; bad values say
// what to write.
func TestSubmitData(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	code, out, errOut := trainyard("submit", "--kube", "--dry-run=client", "--show-children", "--image", "img:1", "--data", "training-data:/mnist_data",
		"--data", "models.v2:/models:ro", "--", "python", "train.py")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var worker corev1.Pod
	if err := yaml.Unmarshal([]byte(strings.Split(out, "\n---\n")[2]), &worker); err != nil {
		t.Fatal(err)
	}
	pod := worker.Spec
	claims := map[string]string{}
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.Name] = v.PersistentVolumeClaim.ClaimName
		}
	}
	mounts := map[string]string{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m.Name + map[bool]string{true: " ro", false: ""}[m.ReadOnly]
	}
	if claims["data-training-data"] != "training-data" || claims["data-models-v2"] != "models.v2" ||
		mounts["/mnist_data"] != "data-training-data" || mounts["/models"] != "data-models-v2 ro" {
		t.Errorf("claims %v, mounts %v", claims, mounts)
	}

	bad := map[string]struct {
		args []string
		want string
	}{
		"run":             {[]string{"run", "--data", "d:/data", "--", "true"}, "here the workers are plain processes on this machine: give your job the data's path directly"},
		"server":          {[]string{"submit", "--data", "d:/data", "--", "true"}, "plain processes on the server's machine"},
		"no path":         {[]string{"submit", "--kube", "--dry-run=client", "--image", "i", "--data", "d", "--", "x"}, `--data "d": use NAME:PATH`},
		"relative path":   {[]string{"submit", "--kube", "--dry-run=client", "--image", "i", "--data", "d:data", "--", "x"}, "must be an absolute, clean path"},
		"bad claim":       {[]string{"submit", "--kube", "--dry-run=client", "--image", "i", "--data", "Big_Data:/d", "--", "x"}, "is not a PersistentVolumeClaim name"},
		"mounted already": {[]string{"submit", "--kube", "--dry-run=client", "--image", "i", "--data", "a:/d", "--data", "b:/d", "--", "x"}, "/d is mounted already"},
	}
	for name, c := range bad {
		if code, _, errOut := trainyard(c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, %s; want exit 2 and %q", name, code, errOut, c.want)
		}
	}
}
