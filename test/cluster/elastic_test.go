package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/internal/operator"
	"github.com/trainyard/trainyard/internal/testcluster"
	"github.com/trainyard/trainyard/internal/workload"
)

// An elastic 2:4 gang spread over two nodes of 2 GPUs each (one GPU per worker: two
// workers on each node) loses the second node while it trains: its kubelet, containerd
// and pods killed. The lost workers' replacements cannot be scheduled (the node that
// remains has no free GPU), so once the elastic settle time has passed the operator
// resizes the gang to 2 on the node that remains, from its checkpoint, without counting a
// restart, and says so (event Resized, status.workers 2): in place, workers 0 and 1 there
// keeping their pods (the workers prefer the first node); the ranks see WORLD_SIZE 2 and
// the world size before. Then the node comes back: the gang grows back to 4 workers over
// both nodes in place, workers 0 and 1 keeping their pods again while the readmitted
// workers' new pods start, at the gang's next checkpoint, and trains on there (it has more
// epochs than the test waits for, so that it never ends before an event the test waits
// for; the test deletes it).
func TestTwoNodesElasticShrinkAndGrow(t *testing.T) {
	c := cluster(t)
	installOperator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	second := twoNodes(t, ctx, 2)

	deleteAtEnd(t, "elastic")
	// The workers leave a lost node 10 s after it is unreachable, not 300. They prefer the
	// first node, so that workers 0 and 1 (made and scheduled first) fill it and worker 0,
	// which runs the gang's coordinator, survives the second's loss.
	kube := `    tolerations:
    - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 10}
    - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 10}
    affinity:
      nodeAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          preference:
            matchExpressions:
            - {key: kubernetes.io/hostname, operator: NotIn, values: [` + second + `]}`
	job{name: "elastic", workers: 4, spec: "  minWorkers: 2\n  resources: {gpu: 1}\n  maxRestarts: 0", mounts: gpuMount(t), kube: kube,
		args: []string{"--epochs", "200", "--train-subset", "2000", "--test-subset", "200", "--sleep-per-step", "0.1"}}.submit(t, ctx)
	workers := runningWorkers(t, ctx, "elastic", 4, 5*time.Minute)
	onNode := map[string][]int{}
	for i, p := range workers {
		onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], i)
	}
	t.Logf("workers by node: %v", onNode)
	slices.Sort(onNode[second])
	if !slices.Equal(onNode[second], []int{2, 3}) {
		t.Fatalf("workers by node %v; want workers 2 and 3 on %s (the others prefer the first node)", onNode, second)
	}
	waitStatus(t, "elastic", 5*time.Minute, func(s trainJobStatus) bool { return s.LatestCheckpoint != "" })
	stopped := time.Now()
	since := func() string { return time.Since(stopped).Round(time.Second).String() }
	if err := c.StopNode(ctx, second); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			restartLost(t, second)
		}
	})
	t.Logf("stopped %s, which held workers %v", second, onNode[second])

	s := waitStatus(t, "elastic", 5*time.Minute, func(s trainJobStatus) bool { return s.Workers == 2 })
	t.Logf("resized %s after the loss: attempt %d, workers dropped %v", since(), s.Attempt, s.DroppedWorkers)
	// Worker 0 runs the gang's coordinator and is on the node that remains: the gang
	// shrinks in place, workers 0 and 1 keeping their pods.
	resizedEvent(t, ctx, "elastic", "resized from 4 to 2 workers: node "+second+" lost")
	resizedEvent(t, ctx, "elastic", "workers 0, 1 keep their pods and go on in place")
	if !slices.Equal(s.DroppedWorkers, []int{2, 3}) {
		t.Errorf("status.droppedWorkers %v; want the lost node's workers 2 and 3", s.DroppedWorkers)
	}
	s = waitStatus(t, "elastic", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" && s.Workers == 2 })
	resized := s.Attempt
	two := runningWorkers(t, ctx, "elastic", 2, 5*time.Minute)
	for i, p := range two {
		if p.Spec.NodeName == second || workload.WorkerIndex(p.Labels) != i {
			t.Errorf("worker %d on %s; want it on the node that remains", i, p.Spec.NodeName)
		}
		if p.UID != workers[i].UID {
			t.Errorf("worker %d runs in pod %s (%s); want its pod from before the loss kept (%s)", i, p.Name, p.UID, workers[i].UID)
		}
	}
	t.Logf("2 workers running attempt %d in place %s after the loss", resized, since())
	waitRunLog(t, "elastic-*", resized, "world_size=2", "resized_from=4", "resuming from checkpoint_")

	back := time.Now()
	restarted = true
	if err := c.StartNode(ctx, second); err != nil {
		t.Fatalf("start %s again: %v", second, err)
	}
	t.Logf("%s ready again in %s", second, time.Since(back).Round(time.Second))
	s = waitStatus(t, "elastic", 5*time.Minute, func(s trainJobStatus) bool { return s.Attempt > resized && s.Workers == 0 })
	t.Logf("grew %s after the node was back: attempt %d", time.Since(back).Round(time.Second), s.Attempt)
	resizedEvent(t, ctx, "elastic", "resized from 2 to 4 workers: node "+second+" is ready again")
	resizedEvent(t, ctx, "elastic", "workers 2, 3 get new pods in attempt 1's pod set and join the gang at its next checkpoint, in place")
	grown := s.Attempt
	four := runningWorkers(t, ctx, "elastic", 4, 5*time.Minute)
	onNode = map[string][]int{}
	for i, p := range four {
		onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], i)
		if i < 2 && p.UID != workers[i].UID {
			t.Errorf("worker %d runs in pod %s (%s) after the grow; want its pod from the start kept (%s)", i, p.Name, p.UID, workers[i].UID)
		}
	}
	t.Logf("grown back: workers by node %v", onNode)
	waitRunLog(t, "elastic-*", grown, "world_size=4", "resized_from=2", "resuming from checkpoint_")
	s = getStatus(t, ctx, "elastic")
	if s.Phase != "Running" || s.Workers != 0 {
		t.Fatalf("status %+v; want Running with all 4 workers; pods:\n%s", s, describePods(t, ctx, "elastic"))
	}
	t.Logf("training with 4 again %s after the loss: %d restarts, %d disruptions (maxRestarts 0)", since(), s.Restarts, s.Disruptions)
	if s.Restarts != s.Disruptions {
		t.Errorf("%d restarts, %d of them disruptions; want the resizes to use none", s.Restarts, s.Disruptions)
	}
	if _, described, _ := trainyardCmd(t, ctx, "describe", "--kube", "elastic"); !strings.Contains(described, "Resized") {
		t.Errorf("describe shows no Resized event:\n%s", described)
	}
}

// An elastic 2:4 gang, one GPU per worker, on the node's 4 GPUs while another pod holds
// 2 of them: the 2 workers that find no room are given up on after the settle time and
// the gang trains with 2. The operator then asks the real scheduler for room with room
// probes, which stay Pending while the GPUs are taken. Once the other pod is deleted the
// scheduler places the probes, the probes are deleted, and the gang grows back to 4
// workers in place: workers 0 and 1 keep their pods, workers 2 and 3 get theirs, and at
// the gang's next checkpoint it restarts with all four, resuming from that checkpoint.
func TestElasticGrowsIntoRoom(t *testing.T) {
	cluster(t)
	installOperator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cs := cl.Client
	blocker := busyboxPod("gpu-holder", "sleep 3600")
	blocker.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, blocker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePod(cs, blocker.Name) })
	waitPod(t, cs, blocker.Name, 2*time.Minute, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })

	deleteAtEnd(t, "roomy")
	job{name: "roomy", workers: 4, spec: "  minWorkers: 2\n  resources: {gpu: 1}\n  maxRestarts: 0", mounts: gpuMount(t),
		args: []string{"--epochs", "200", "--train-subset", "2000", "--test-subset", "200", "--sleep-per-step", "0.1"}}.submit(t, ctx)
	s := waitStatus(t, "roomy", 5*time.Minute, func(s trainJobStatus) bool { return s.Workers == 2 })
	resizedEvent(t, ctx, "roomy", "resized from 4 to 2 workers: workers 2, 3 cannot be scheduled for 30s")
	shrunk := s.Attempt
	two := runningWorkers(t, ctx, "roomy", 2, 5*time.Minute)
	waitStatus(t, "roomy", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" && s.Attempt == shrunk })
	probes := func() []corev1.Pod {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: operator.LabelRoomProbe})
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(l.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	}
	waitFor(t, "two room probes, Pending", 2*time.Minute, func() bool {
		ps := probes()
		return len(ps) == 2 && ps[0].Spec.NodeName == "" && ps[1].Spec.NodeName == ""
	})
	t.Logf("room probes: %s", describePods(t, ctx, "roomy"))

	deletePod(cs, blocker.Name)
	freed := time.Now()
	// The grow in place deletes the probes as soon as the scheduler places them (the
	// workers' pods take their room): the grow recorded says they were placed.
	waitStatus(t, "roomy", 3*time.Minute, func(s trainJobStatus) bool { return s.Workers == 0 })
	t.Logf("grow recorded %s after the GPUs were freed", time.Since(freed).Round(time.Second))
	s = waitStatus(t, "roomy", 5*time.Minute, func(s trainJobStatus) bool { return s.Attempt > shrunk && s.Workers == 0 })
	t.Logf("grew %s after the GPUs were freed: attempt %d", time.Since(freed).Round(time.Second), s.Attempt)
	resizedEvent(t, ctx, "roomy", "resized from 2 to 4 workers: room for 2 more worker(s): room probes placed on "+testcluster.NodeName)
	resizedEvent(t, ctx, "roomy", "the 2 running keep their pods and train meanwhile")
	four := runningWorkers(t, ctx, "roomy", 4, 5*time.Minute)
	for i, p := range two {
		if four[i].UID != p.UID {
			t.Errorf("worker %d runs in pod %s (%s) after the grow; want its pod kept (%s)", i, four[i].Name, four[i].UID, p.UID)
		}
	}
	waitRunLog(t, "roomy-*", int(s.Attempt), "world_size=4", "resized_from=2", "resuming from checkpoint_")
	waitFor(t, "the probes to go", time.Minute, func() bool { return len(probes()) == 0 })
	if s = getStatus(t, ctx, "roomy"); s.Restarts != s.Disruptions {
		t.Errorf("%d restarts, %d of them disruptions; want the resizes to use none", s.Restarts, s.Disruptions)
	}
}

// resizedEvent waits for an Event Resized of the TrainJob name whose note says want.
func resizedEvent(t *testing.T, ctx context.Context, name, want string) {
	t.Helper()
	var notes []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		l, err := cl.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		notes = notes[:0]
		for _, e := range l.Items {
			if e.Regarding.Name == name && e.Reason == "Resized" {
				if strings.Contains(e.Note, want) {
					t.Logf("event Resized: %s", e.Note)
					return
				}
				notes = append(notes, e.Note)
			}
		}
	}
	t.Errorf("no event Resized saying %q; the Resized events: %q", want, notes)
}

// waitRunLog waits up to 2 minutes for rank 0's log of an attempt (see runLog) to say
// every one of wants.
func waitRunLog(t *testing.T, pattern string, attempt int, wants ...string) {
	t.Helper()
	log := ""
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		dirs, _ := filepath.Glob(filepath.Join(sharedDir, "results", pattern))
		var newest string
		var at time.Time
		for _, d := range dirs {
			if info, err := os.Stat(d); err == nil && info.ModTime().After(at) {
				newest, at = d, info.ModTime()
			}
		}
		data, _ := os.ReadFile(filepath.Join(newest, "logs", fmt.Sprintf("attempt-%d", attempt), "rank-0.log"))
		log = string(data)
		missing := slices.DeleteFunc(slices.Clone(wants), func(w string) bool { return strings.Contains(log, w) })
		if len(missing) == 0 {
			t.Logf("rank 0's log of attempt %d says %q", attempt, wants)
			return
		}
	}
	t.Errorf("rank 0's log of attempt %d lacks one of %q:\n%s", attempt, wants, log)
}
