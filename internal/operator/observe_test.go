package operator

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/internal/workload"
)

func pod(index string, phase corev1.PodPhase, change func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p" + index, Labels: map[string]string{workload.LabelCompletionIndex: index}},
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
		job   *batchv1.Job
		pods  []corev1.Pod
		check func(observation) string
	}{
		{"all running", nil, []corev1.Pod{pod("0", corev1.PodRunning, nil), pod("1", corev1.PodRunning, nil)},
			func(o observation) string {
				return expect(o.allRunning() && !o.done() && o.failure == nil, "all running")
			}},
		{"all succeeded", nil, []corev1.Pod{pod("0", corev1.PodSucceeded, nil), pod("1", corev1.PodSucceeded, nil)},
			func(o observation) string { return expect(o.done(), "done") }},
		{"one failed: its own reason", nil, []corev1.Pod{pod("0", corev1.PodRunning, nil), pod("1", corev1.PodFailed, terminated(1, summary))},
			func(o observation) string {
				return expect(o.failure != nil && o.failure.worker == 1 && !o.failure.disruption && !o.failure.fatal &&
					strings.Contains(o.failure.reason, "rank 3 exited with code 1"), "failure of worker 1 with the summary's reason")
			}},
		{"exit code without summary", nil, []corev1.Pod{pod("0", corev1.PodFailed, terminated(137, ""))},
			func(o observation) string {
				return expect(o.failure != nil && strings.Contains(o.failure.reason, "exited with code 137"), "exit code in the reason")
			}},
		{"bad input is fatal", nil, []corev1.Pod{pod("0", corev1.PodFailed, terminated(2, summary))},
			func(o observation) string { return expect(o.failure != nil && o.failure.fatal, "fatal") }},
		{"user code exiting 2 without a summary is not", nil, []corev1.Pod{pod("0", corev1.PodFailed, terminated(2, "oops"))},
			func(o observation) string { return expect(o.failure != nil && !o.failure.fatal, "not fatal") }},
		{"eviction by reason", nil, []corev1.Pod{pod("0", corev1.PodFailed, func(p *corev1.Pod) { p.Status.Reason = "Evicted" })},
			func(o observation) string { return expect(o.failure != nil && o.failure.disruption, "disruption") }},
		{"preemption by condition, still running", nil, []corev1.Pod{pod("0", corev1.PodRunning, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"}}
		})}, func(o observation) string {
			return expect(o.failure != nil && o.failure.disruption && strings.Contains(o.failure.reason, "PreemptionByScheduler"), "disruption")
		}},
		{"image pull", nil, []corev1.Pod{pod("0", corev1.PodPending, func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: workload.InitContainer,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
		})}, func(o observation) string {
			return expect(o.blocked != nil && o.blocked.reason == "ErrImagePull" && !o.blocked.fatal && strings.Contains(o.blocked.message, workload.InitContainer), "blocked")
		}},
		{"invalid image name is fatal", nil, []corev1.Pod{pod("0", corev1.PodPending, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "InvalidImageName"}}}}
		})}, func(o observation) string { return expect(o.blocked != nil && o.blocked.fatal, "fatal") }},
		{"queued for Kueue", &batchv1.Job{Spec: batchv1.JobSpec{Suspend: ptr(true)}}, nil,
			func(o observation) string { return expect(o.queued, "queued") }},
		{"Job failed without pods", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}, nil,
			func(o observation) string {
				return expect(o.failure != nil && strings.Contains(o.failure.reason, "BackoffLimitExceeded"), "failure")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observe(tc.job, tc.pods, 2)
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
