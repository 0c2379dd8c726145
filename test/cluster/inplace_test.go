package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestInPlaceRestartsAndReplacesALostPod: on real pods, a rank killed restarts the gang in
// place (the same pod UIDs before and after), and a worker's pod deleted is replaced
// alone, under the same name (so the same host name), while worker 0's pod and launcher
// stay; the gang goes on from its checkpoint and finishes.
func TestInPlaceRestartsAndReplacesALostPod(t *testing.T) {
	cluster(t)
	installOperator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const name = "inplace"
	job{name: name, spec: "  maxRestarts: 2",
		args: []string{"--epochs", "4", "--train-subset", "6000", "--test-subset", "1000", "--sleep-per-step", "0.05"}}.submit(t, ctx)
	waitStatus(t, name, 5*time.Minute, func(s trainJobStatus) bool { return s.LatestCheckpoint != "" })
	before := podUIDs(t, ctx, name)

	killPython(t, workerPod(t, ctx, name, 1))
	s := waitStatus(t, name, 4*time.Minute, func(s trainJobStatus) bool { return s.Attempt >= 2 && s.Phase == "Running" || s.Phase == "Failed" })
	if s.Phase != "Running" || s.Restarts != 1 {
		t.Fatalf("after a rank was killed: %+v; want attempt 2 running after 1 restart", s)
	}
	if after := podUIDs(t, ctx, name); !sameUIDs(before, after) {
		t.Errorf("pods after the restart in place: %v; want the same as before: %v", after, before)
	}

	lost := name + "-a1-1"
	if err := cl.Client.CoreV1().Pods("default").Delete(ctx, lost, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "worker 1's pod replaced and running", 4*time.Minute, func() bool {
		p, err := cl.Client.CoreV1().Pods("default").Get(ctx, lost, metav1.GetOptions{})
		return err == nil && p.UID != before[lost] && p.Status.Phase == "Running"
	})
	now := podUIDs(t, ctx, name)
	if w0 := name + "-a1-0"; now[w0] != before[w0] {
		t.Errorf("worker 0's pod %s: uid %s, was %s; want it kept while worker 1 is replaced", w0, now[w0], before[w0])
	}
	s = waitStatus(t, name, 8*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
	// The example reports each epoch, and once more when its pod is stopped (a checkpoint
	// at the preemption notice).
	if s.Phase != "Succeeded" || fmt.Sprint(s.LastMetrics["epoch"]) != "4" || s.Disruptions < 1 ||
		len(s.WorkerReplacements) != 2 || s.WorkerReplacements[1] != 1 {
		t.Errorf("status %+v; want Succeeded after epoch 4, the lost pod counted as a disruption and as worker 1's replacement", s)
	}
	_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", name)
	if !strings.Contains(logs, "resuming from checkpoint_") {
		t.Errorf("the gang did not resume from a checkpoint after worker 1's pod was replaced:\n%s", logs)
	}
	_, described, _ := trainyardCmd(t, ctx, "describe", "--kube", name)
	t.Logf("describe:\n%s", described)
	if !strings.Contains(described, "ReplacingWorker") || !strings.Contains(described, lost+" on ") {
		t.Errorf("describe does not tell that worker 1's pod was replaced:\n%s", described)
	}
	trainyardCmd(t, ctx, "delete", "--kube", name)
}

// podUIDs maps the job's pods' names to their UIDs.
func podUIDs(t *testing.T, ctx context.Context, job string) map[string]types.UID {
	t.Helper()
	pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, job+"-a") {
			out[p.Name] = p.UID
		}
	}
	return out
}

func sameUIDs(a, b map[string]types.UID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
