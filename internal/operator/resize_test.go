package operator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPlanShrink(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	stuck := func(worker int, ago time.Duration) stuckWorker {
		return stuckWorker{worker: worker, pod: "p", since: now.Add(-ago), message: "0/2 nodes are available"}
	}
	type want struct {
		Resize bool
		From   int
		To     int
		Why    string
		Wait   time.Duration
		Lost   []string
	}
	cases := map[string]struct {
		stuck        []stuckWorker
		workers, min int
		lostOn       map[int]string
		lost         []string
		deadline     time.Time
		want         want
	}{
		"nothing stuck": {workers: 4, min: 2},
		"not elastic":   {stuck: []stuckWorker{stuck(1, time.Hour)}, workers: 2, min: 2},
		"too few would remain: wait as before": {stuck: []stuckWorker{stuck(1, time.Hour), stuck(2, time.Hour), stuck(3, time.Hour)},
			workers: 4, min: 2},
		"stuck for less than the settle time: look again then": {stuck: []stuckWorker{stuck(3, 10*time.Second), stuck(2, 25*time.Second)},
			workers: 4, min: 2, want: want{Wait: 20 * time.Second}},
		"a lost node's two workers": {stuck: []stuckWorker{stuck(2, time.Minute), stuck(3, 31*time.Second)}, workers: 4, min: 2,
			lostOn: map[int]string{2: "node-b", 3: "node-b", 1: "node-c"},
			want: want{Resize: true, From: 4, To: 2,
				Why: "node node-b lost; workers 2, 3 cannot be scheduled for 30s (0/2 nodes are available)", Lost: []string{"node-b"}}},
		"an operator restarted since the loss: the nodes the status recorded": {stuck: []stuckWorker{stuck(2, time.Minute)},
			workers: 4, min: 2, lost: []string{"node-c", "node-b"},
			want: want{Resize: true, From: 4, To: 3,
				Why: "nodes node-b, node-c lost; worker 2 cannot be scheduled for 30s (0/2 nodes are available)", Lost: []string{"node-b", "node-c"}}},
		"the pre-running deadline comes before the settle time: look again then": {stuck: []stuckWorker{stuck(3, 10*time.Second)},
			workers: 4, min: 2, deadline: now.Add(5 * time.Second), want: want{Wait: 5 * time.Second}},
		"at the pre-running deadline: shrink rather than fail": {stuck: []stuckWorker{stuck(3, 10*time.Second), stuck(1, 2*time.Second)},
			workers: 4, min: 2, deadline: now,
			want: want{Resize: true, From: 4, To: 2, Why: "workers 3, 1 cannot be scheduled by the attempt's pre-running deadline (0/2 nodes are available)"}},
		"at the pre-running deadline, too few would remain": {stuck: []stuckWorker{stuck(3, 10*time.Second)},
			workers: 2, min: 2, deadline: now.Add(-time.Second)},
		"one worker that never ran": {stuck: []stuckWorker{stuck(1, time.Minute)}, workers: 3, min: 1,
			want: want{Resize: true, From: 3, To: 2, Why: "worker 1 cannot be scheduled for 30s (0/2 nodes are available)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rule := shrinkRule{workers: tc.workers, min: tc.min, settle: 30 * time.Second, deadline: tc.deadline}
			r, wait, ok := planShrink(tc.stuck, rule, now, tc.lostOn, tc.lost)
			got := want{Resize: ok, From: r.from, To: r.to, Why: r.why, Wait: wait, Lost: r.lost}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("planShrink (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObserveStuck(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	unsched := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available", LastTransitionTime: since}}
	}
	nominated := func(p *corev1.Pod) { // the scheduler preempts pods to make room for it
		unsched(p)
		p.Status.NominatedNodeName = "node-a"
	}
	pods := []corev1.Pod{pod("0", corev1.PodRunning, nil), pod("1", corev1.PodPending, unsched),
		pod("2", corev1.PodPending, nil), pod("3", corev1.PodPending, unsched), pod("4", corev1.PodPending, nominated)}
	o := observe(pods, seq(5), func(string) bool { return false })
	got := o.stuck
	want := []stuckWorker{{worker: 1, pod: "p1", since: since.Time, message: "0/2 nodes are available"},
		{worker: 3, pod: "p3", since: since.Time, message: "0/2 nodes are available"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(stuckWorker{})); diff != "" {
		t.Errorf("stuck workers (-want +got):\n%s", diff)
	}
}

func TestPlanGrow(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	readyB := func(n string) bool { return n == "node-b" }
	none := func(string) bool { return false }
	type want struct {
		Grow       bool
		Node       string
		Wait       time.Duration
		Back       time.Time
		Checkpoint string
	}
	cases := map[string]struct {
		sh         shrunk
		nodes      []string
		ready      func(string) bool
		checkpoint string
		want       want
	}{
		"the node still lost": {nodes: []string{"node-b"}, ready: none, checkpoint: "c1",
			want: want{Wait: growPoll}},
		"lost again before the grow: forgotten": {nodes: []string{"node-b"}, sh: shrunk{back: now.Add(-time.Minute), checkpoint: "c1"},
			ready: none, checkpoint: "c2", want: want{Wait: growPoll}},
		"back: wait for the next checkpoint, at most the interval": {nodes: []string{"node-a", "node-b"}, ready: readyB, checkpoint: "c1",
			want: want{Node: "node-b", Wait: 10 * time.Minute, Back: now, Checkpoint: "c1"}},
		"the next checkpoint": {nodes: []string{"node-b"}, sh: shrunk{back: now.Add(-time.Minute), checkpoint: "c1"}, ready: readyB, checkpoint: "c2",
			want: want{Grow: true, Node: "node-b", Back: now.Add(-time.Minute), Checkpoint: "c1"}},
		"the interval": {nodes: []string{"node-b"}, sh: shrunk{back: now.Add(-10 * time.Minute), checkpoint: "c1"}, ready: readyB, checkpoint: "c1",
			want: want{Grow: true, Node: "node-b", Back: now.Add(-10 * time.Minute), Checkpoint: "c1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next, node, wait, grow := planGrow(tc.sh, tc.nodes, tc.ready, tc.checkpoint, 10*time.Minute, now)
			got := want{Grow: grow, Node: node, Wait: wait, Back: next.back, Checkpoint: next.checkpoint}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("planGrow (-want +got):\n%s", diff)
			}
		})
	}
}

// seq is 0, 1, ..., n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
