package operator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainyard/trainyard/internal/workload"
)

func pod(index string, phase corev1.PodPhase, change func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p" + index, Labels: map[string]string{workload.LabelWorkerIndex: index}, UID: types.UID("uid-" + index)},
		Status: corev1.PodStatus{Phase: phase}}
	if change != nil {
		change(&p)
	}
	return p
}

func terminated(code int32, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}
	}
}

func TestObserve(t *testing.T) {
	summary := string(workload.Summary{Outcome: "failed", Reason: "rank 3 exited with code 1"}.Encode())
	for _, tc := range []struct {
		name  string
		down  string // a lost node
		pods  []corev1.Pod
		check func(observation) string
	}{
		{"all running", "", []corev1.Pod{pod("0", corev1.PodRunning, nil), pod("1", corev1.PodRunning, nil)},
			func(o observation) string {
				return expect(o.allRunning() && !o.done() && o.failure == nil, "all running")
			}},
		{"all succeeded", "", []corev1.Pod{pod("0", corev1.PodSucceeded, nil), pod("1", corev1.PodSucceeded, nil)},
			func(o observation) string { return expect(o.done(), "done") }},
		{"one failed: its own reason", "", []corev1.Pod{pod("0", corev1.PodRunning, nil), pod("1", corev1.PodFailed, terminated(1, summary))},
			func(o observation) string {
				return expect(o.failure != nil && o.failure.worker == 1 && !o.failure.disruption && !o.failure.fatal &&
					strings.Contains(o.failure.reason, "rank 3 exited with code 1"), "failure of worker 1 with the summary's reason")
			}},
		{"exit code without summary", "", []corev1.Pod{pod("0", corev1.PodFailed, terminated(137, ""))},
			func(o observation) string {
				return expect(o.failure != nil && strings.Contains(o.failure.reason, "exited with code 137"), "exit code in the reason")
			}},
		{"bad input is fatal", "", []corev1.Pod{pod("0", corev1.PodFailed, terminated(2, summary))},
			func(o observation) string { return expect(o.failure != nil && o.failure.fatal, "fatal") }},
		{"user code exiting 2 without a summary is not", "", []corev1.Pod{pod("0", corev1.PodFailed, terminated(2, "oops"))},
			func(o observation) string { return expect(o.failure != nil && !o.failure.fatal, "not fatal") }},
		{"eviction by reason: replaced alone", "", []corev1.Pod{pod("0", corev1.PodFailed, func(p *corev1.Pod) { p.Status.Reason = "Evicted" })},
			func(o observation) string {
				return expect(o.failure == nil && len(o.lost) == 1 && o.lost[0].disruption && !o.lost[0].deleting, "worker 0 lost, not a failure")
			}},
		{"preemption by condition, still running", "", []corev1.Pod{pod("0", corev1.PodRunning, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"}}
		})}, func(o observation) string {
			return expect(o.failure == nil && len(o.lost) == 1 && strings.Contains(o.lost[0].reason, "PreemptionByScheduler"), "lost by disruption")
		}},
		{"OOM-killed: replaced alone", "", []corev1.Pod{pod("0", corev1.PodRunning, nil), pod("1", corev1.PodFailed, func(p *corev1.Pod) {
			terminated(137, "")(p)
			p.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
		})}, func(o observation) string {
			return expect(o.failure == nil && len(o.lost) == 1 && o.lost[0].worker == 1 && o.running == 1, "worker 1 lost")
		}},
		{"the gang failed for good: not replaced", "", []corev1.Pod{pod("0", corev1.PodFailed, func(p *corev1.Pod) {
			p.Status.Reason = "Evicted"
			terminated(1, string(workload.Summary{Outcome: "failed", Final: "WorkerFailed"}.Encode()))(p)
		})}, func(o observation) string { return expect(o.failure != nil && len(o.lost) == 0, "a failure") }},
		{"deleted by someone: waited for", "", []corev1.Pod{pod("0", corev1.PodRunning, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} })},
			func(o observation) string {
				return expect(len(o.lost) == 1 && o.lost[0].deleting && !o.lost[0].nodeDown && o.running == 0, "lost, being deleted")
			}},
		{"left the gang on SIGTERM", "", []corev1.Pod{pod("0", corev1.PodRunning, nil), pod("1", corev1.PodSucceeded,
			terminated(0, string(workload.Summary{Outcome: "interrupted", Reason: "preempted"}.Encode())))},
			func(o observation) string {
				return expect(len(o.lost) == 1 && o.succeeded == 0 && !o.done(), "lost, not done")
			}},
		{"on a lost node", "n2", []corev1.Pod{pod("0", corev1.PodRunning, nil), pod("1", corev1.PodRunning, func(p *corev1.Pod) {
			p.Spec.NodeName = "n2"
			p.DeletionTimestamp = &metav1.Time{} // an eviction no kubelet will confirm
		})}, func(o observation) string {
			return expect(len(o.lost) == 1 && o.lost[0].nodeDown && !o.lost[0].deleting && strings.Contains(o.lost[0].reason, "n2"), "lost, to force-delete")
		}},
		{"missing worker", "", []corev1.Pod{pod("1", corev1.PodRunning, nil)},
			func(o observation) string {
				return expect(len(o.missing) == 1 && o.missing[0] == 0, "worker 0 missing")
			}},
		{"image pull", "", []corev1.Pod{pod("0", corev1.PodPending, func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: workload.InitContainer,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
		})}, func(o observation) string {
			return expect(o.blocked != nil && o.blocked.reason == "ErrImagePull" && !o.blocked.fatal && strings.Contains(o.blocked.message, workload.InitContainer), "blocked")
		}},
		{"invalid image name is fatal", "", []corev1.Pod{pod("0", corev1.PodPending, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "InvalidImageName"}}}}
		})}, func(o observation) string { return expect(o.blocked != nil && o.blocked.fatal, "fatal") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observe(tc.pods, seq(len(tc.pods)), func(n string) bool { return n != "" && n == tc.down })
			if msg := tc.check(o); msg != "" {
				t.Errorf("%s; got %+v (failure %+v, blocked %+v)", msg, o, o.failure, o.blocked)
			}
		})
	}
}

func expect(ok bool, what string) string {
	if ok {
		return ""
	}
	return "want " + what
}
