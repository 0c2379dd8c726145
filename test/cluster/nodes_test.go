package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainyard/trainyard/internal/testcluster"
	"github.com/trainyard/trainyard/internal/workload"
)

// twoNodes gives the test a second node for its duration, as GPU node pools are: both
// nodes advertise gpusPerNode GPUs and carry the GPU taint (GPU pods tolerate it through
// the API server's ExtendedResourceToleration). The operator, installed before, keeps
// running on the first node (NoSchedule evicts nothing). It returns the second node's
// name; when the test ends the second node is removed and the first is as before.
func twoNodes(t *testing.T, ctx context.Context, gpusPerNode int) string {
	t.Helper()
	c := cluster(t)
	start := time.Now()
	second, err := c.AddNode(ctx, testcluster.NodeConfig{GPUs: gpusPerNode, Taints: []corev1.Taint{testcluster.GPUTaint}})
	t.Cleanup(func() {
		ctx := context.Background()
		for _, n := range c.Nodes()[1:] {
			if err := c.RemoveNode(ctx, n); err != nil {
				t.Errorf("remove node %s: %v", n, err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	rss, _ := c.NodeRSS(second)
	t.Logf("node %s added in %s (its kubelet and containerd: %d MiB)", second, time.Since(start).Round(100*time.Millisecond), rss>>20)
	first := testcluster.NodeName
	if err := c.Taint(ctx, first, testcluster.GPUTaint); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Untaint(context.Background(), first, testcluster.GPUTaint); err != nil {
			t.Error(err)
		}
	})
	if err := c.AdvertiseGPUs(ctx, first, gpusPerNode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.StartNode(context.Background(), first); err == nil {
			t.Logf("node %s started again", first)
		}
		if err := c.AdvertiseGPUs(context.Background(), first, gpus); err != nil {
			t.Error(err)
		}
	})
	return second
}

// deleteAtEnd deletes the TrainJob when the test ends and waits until its pods are gone
// (before the second node is removed under them).
func deleteAtEnd(t *testing.T, name string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		trainyardCmd(t, ctx, "delete", "--kube", name)
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if len(jobPods(t, ctx, name)) == 0 {
				return
			}
			time.Sleep(time.Second)
		}
		t.Logf("pods of %s still there 2 minutes after its deletion", name)
	})
}

// jobPods returns the TrainJob's pods not being deleted, by name.
func jobPods(t *testing.T, ctx context.Context, name string) []corev1.Pod {
	t.Helper()
	pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: workload.LabelJob + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// runningWorkers waits until the job has n running worker pods and returns them by
// worker index.
func runningWorkers(t *testing.T, ctx context.Context, name string, n int, timeout time.Duration) map[int]corev1.Pod {
	t.Helper()
	var byIndex map[int]corev1.Pod
	deadline := time.Now().Add(timeout)
	for {
		byIndex = map[int]corev1.Pod{}
		for _, p := range jobPods(t, ctx, name) {
			if p.Status.Phase != corev1.PodRunning {
				continue
			}
			if i := workload.WorkerIndex(p.Labels); i >= 0 {
				byIndex[i] = p
			}
		}
		if len(byIndex) == n {
			return byIndex
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d running workers within %s, want %d; pods:\n%s", name, len(byIndex), timeout, n, describePods(t, ctx, name))
		}
		time.Sleep(time.Second)
	}
}

// describePods is a line per pod of the job: name, node, phase and status.
func describePods(t *testing.T, ctx context.Context, name string) string {
	pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: workload.LabelJob + "=" + name})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		ready := "not ready"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = "ready"
			}
		}
		fmt.Fprintf(&b, "  %s on %q: %s, %s, deleting %v", p.Name, p.Spec.NodeName, p.Status.Phase, ready, p.DeletionTimestamp != nil)
		if p.Status.Reason != "" || p.Status.Message != "" {
			fmt.Fprintf(&b, " (%s: %s)", p.Status.Reason, p.Status.Message)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// gpuMount mounts the stand-in nvidia-smi (see standInSMI) into a GPU worker.
func gpuMount(t *testing.T) string {
	return "{name: shared, mountPath: /usr/local/bin, subPath: " + filepath.Base(standInSMI(t)) + ", readOnly: true}"
}

// A 4-worker gang asking 1 GPU per worker on two nodes of 2 GPUs each must spread over
// both; it trains the Fashion-MNIST example over DDP across them to the end. A worker on
// the other node than worker 0 resolves MASTER_ADDR (worker 0's name under the job's
// headless Service) through CoreDNS, which listens on the first node's address, to
// worker 0's pod address, routed between the nodes' bridges.
func TestTwoNodesGangAcrossNodes(t *testing.T) {
	c := cluster(t)
	installOperator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	second := twoNodes(t, ctx, 2)

	deleteAtEnd(t, "spread")
	job{name: "spread", workers: 4, spec: "  resources: {gpu: 1}\n  maxRestarts: 0", mounts: gpuMount(t),
		args: []string{"--epochs", "2", "--train-subset", "2000", "--test-subset", "400", "--sleep-per-step", "0.1"}}.submit(t, ctx)
	workers := runningWorkers(t, ctx, "spread", 4, 5*time.Minute)
	onNode := map[string][]int{}
	for i, p := range workers {
		onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], i)
	}
	t.Logf("workers by node: %v", onNode)
	if len(onNode[testcluster.NodeName]) != 2 || len(onNode[second]) != 2 {
		t.Fatalf("workers by node %v; want 2 on each of %s and %s", onNode, testcluster.NodeName, second)
	}
	zero := workers[0]
	for i, p := range workers {
		if p.Spec.NodeName == zero.Spec.NodeName {
			continue
		}
		out, err := c.Exec(ctx, "default", p.Name, "worker", "python3", "-c",
			"import os, socket; a = os.environ['MASTER_ADDR']; print(a, socket.gethostbyname(a))")
		if err != nil {
			t.Fatalf("resolve MASTER_ADDR in worker %d: %v", i, err)
		}
		f := strings.Fields(out)
		if len(f) != 2 || f[1] != zero.Status.PodIP {
			t.Errorf("worker %d on %s resolved %q; want worker 0's address %s (on %s)", i, p.Spec.NodeName, strings.TrimSpace(out), zero.Status.PodIP, zero.Spec.NodeName)
		} else {
			t.Logf("worker %d on %s resolved %s to worker 0's address %s on %s", i, p.Spec.NodeName, f[0], f[1], zero.Spec.NodeName)
		}
	}
	s := waitStatus(t, "spread", 10*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
	if s.Phase != "Succeeded" || s.Iteration != 2 {
		_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "--all-ranks", "spread")
		t.Fatalf("status %+v, want Succeeded at iteration 2; logs:\n%s", s, logs)
	}
	// All four ranks took part: the example's rank 0 names the world size.
	if log := runLog(t, "spread-*", 1); !strings.Contains(log, "world_size=4") {
		t.Errorf("rank 0's log lacks world_size=4:\n%s", log)
	}
}

// A 2-worker gang, spread over two nodes with 4 GPUs each, loses the node that holds
// worker 1 while it trains: the node's kubelet, containerd and pods killed, the node
// NotReady and tainted unreachable. The node that remains has no room at first (its GPUs
// lowered to 1, which worker 0 holds): the job waits and says why. Once the node has room
// again, the gang is rebuilt there and resumes from its checkpoint.
//
// The pod on the lost node never finishes terminating (no kubelet confirms it), and the
// operator waits for an attempt's pods to go before it starts the next. So the test
// gives it a minute alone; then, as an administrator does for a node known to be down
// (Kubernetes' non-graceful node shutdown), it taints the node out-of-service, which has
// the pod garbage collector force-delete the pods there, and expects the gang rebuilt.
// The test is skipped at its end (after checking everything else) when the operator did
// not rebuild the gang alone.
func TestTwoNodesNodeLost(t *testing.T) {
	c := cluster(t)
	installOperator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	second := twoNodes(t, ctx, 4)
	// The operator may have to move when the first node is the one lost.
	patchOperatorTolerations(t, ctx)

	deleteAtEnd(t, "lost")
	// Spread by a preferred anti-affinity (a required one could not be rebuilt on one
	// node); the workers leave a lost node 10 s after it is unreachable, not 300.
	kube := `    affinity:
      podAntiAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector: {matchLabels: {` + workload.LabelJob + `: lost}}
    tolerations:
    - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 10}
    - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 10}`
	job{name: "lost", spec: "  resources: {gpu: 1}\n  maxRestarts: 3", mounts: gpuMount(t), kube: kube,
		// Epochs enough that the gang is still training when its node goes (8 once ended first).
		args: []string{"--epochs", "30", "--train-subset", "1000", "--test-subset", "200", "--sleep-per-step", "0.05"}}.submit(t, ctx)
	workers := runningWorkers(t, ctx, "lost", 2, 5*time.Minute)
	if workers[0].Spec.NodeName == workers[1].Spec.NodeName {
		t.Fatalf("both workers on %s; want them spread over %v", workers[0].Spec.NodeName, c.Nodes())
	}
	lost, remaining := workers[1].Spec.NodeName, workers[0].Spec.NodeName
	// A replacement may have the same name (the operator replaces a lost worker's pod
	// under its name): pods are told apart by UID.
	before := map[types.UID]bool{workers[0].UID: true, workers[1].UID: true}
	waitStatus(t, "lost", 5*time.Minute, func(s trainJobStatus) bool { return s.LatestCheckpoint != "" })
	// No room on the node that remains: worker 0 holds its one GPU.
	if err := c.AdvertiseGPUs(ctx, remaining, 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("worker 0 on %s, worker 1 on %s (the second node is %s); stopping %s", remaining, lost, second, lost)
	stopped := time.Now()
	if err := c.StopNode(ctx, lost); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restartLost(t, lost) })
	since := func() string { return time.Since(stopped).Round(time.Second).String() }
	waitFor(t, "node "+lost+" NotReady", 2*time.Minute, func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, lost, metav1.GetOptions{})
		return err == nil && !ready(n)
	})
	t.Logf("%s NotReady %s after it was stopped", lost, since())

	// A pod of the job that did not exist before the loss, on the node that remains.
	replaced := func() bool {
		for _, p := range jobPods(t, ctx, "lost") {
			if !before[p.UID] && p.Spec.NodeName != lost {
				return true
			}
		}
		return false
	}
	alone := true
	for deadline := time.Now().Add(time.Minute); !replaced(); time.Sleep(2 * time.Second) {
		if time.Now().After(deadline) {
			alone = false
			s := getStatus(t, ctx, "lost")
			t.Logf("%s after the loss, no worker replaced: status phase %s, attempt %d, reason %q; pods:\n%s",
				since(), s.Phase, s.Attempt, s.Reason, describePods(t, ctx, "lost"))
			if err := c.Taint(ctx, lost, outOfService); err != nil {
				t.Fatal(err)
			}
			t.Logf("tainted %s out-of-service at %s", lost, since())
			waitFor(t, "a worker replaced after the out-of-service taint", 2*time.Minute, replaced)
			break
		}
	}
	t.Logf("a replacement worker created %s after the loss", since())
	s := waitStatus(t, "lost", 3*time.Minute, func(s trainJobStatus) bool { return s.hasReason("InsufficientGPU", "Unschedulable") })
	t.Logf("no room on %s: the job says why (%s after the loss): %s", remaining, since(), whyPending(s))
	if err := c.AdvertiseGPUs(ctx, remaining, 4); err != nil {
		t.Fatal(err)
	}
	s = waitStatus(t, "lost", 8*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
	if s.Phase != "Succeeded" || fmt.Sprint(s.LastMetrics["epoch"]) != "30" {
		t.Fatalf("status %+v after losing %s; want Succeeded after epoch 30; pods:\n%s", s, lost, describePods(t, ctx, "lost"))
	}
	t.Logf("succeeded %s after %s was lost: %d restarts, %d disruptions", since(), lost, s.Restarts, s.Disruptions)
	_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "lost")
	if !strings.Contains(logs, "resuming from checkpoint_") {
		t.Errorf("the rebuilt gang did not resume from its checkpoint:\n%s", logs)
	}
	for _, p := range jobPods(t, ctx, "lost") {
		if p.Spec.NodeName == lost && p.Status.Phase == corev1.PodSucceeded {
			t.Errorf("pod %s succeeded on the lost node %s", p.Name, lost)
		}
	}
	if !alone {
		t.Skip("needs the operator to replace pods on a lost node: issue 21 part 1 (it waits for the lost node's pod, which stays Terminating, before starting the next attempt; rebuilt once the node was tainted out-of-service)")
	}
}

// outOfService is the taint an administrator puts on a node known to be down
// (non-graceful node shutdown): the pod garbage collector then force-deletes its pods.
var outOfService = corev1.Taint{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// restartLost starts the lost node again, without its out-of-service taint, so the
// cluster is whole for the next test.
func restartLost(t *testing.T, name string) {
	ctx := context.Background()
	if err := cl.Untaint(ctx, name, outOfService); err != nil {
		t.Error(err)
	}
	start := time.Now()
	if err := cl.StartNode(ctx, name); err != nil {
		t.Errorf("start %s again: %v", name, err)
		return
	}
	t.Logf("%s started again in %s", name, time.Since(start).Round(100*time.Millisecond))
}

// whyPending is the message of the first condition that says a worker cannot be placed.
func whyPending(s trainJobStatus) string {
	for _, c := range s.Conditions {
		if c.Reason == "InsufficientGPU" || c.Reason == "Unschedulable" {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

func ready(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// patchOperatorTolerations lets the operator's pod move to the other GPU node when its
// own is lost (10 s after the node is unreachable), as a small cluster without CPU nodes
// would; until then it prefers the first node.
func patchOperatorTolerations(t *testing.T, ctx context.Context) {
	t.Helper()
	patch := `{"spec":{"template":{"spec":{
	  "affinity":{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":100,"preference":
	    {"matchExpressions":[{"key":"kubernetes.io/hostname","operator":"In","values":["` + testcluster.NodeName + `"]}]}}]}},
	  "tolerations":[
	  {"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"},
	  {"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":10},
	  {"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":10}]}}}}`
	if _, err := cl.Client.AppsV1().Deployments("trainyard-system").Patch(ctx, "trainyard-operator", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch the operator's tolerations: %v", err)
	}
	waitFor(t, "the operator's Deployment to roll out", 3*time.Minute, func() bool {
		d, err := cl.Client.AppsV1().Deployments("trainyard-system").Get(ctx, "trainyard-operator", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.ReadyReplicas == 1 && d.Status.Replicas == 1
	})
}
