package kubecli

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// The current attempt of a gang that restarted in place runs on an earlier attempt's
// pods (status.podsAttempt): get, describe, top and logs find those.
func TestWorkerPodsOfAnInPlaceAttempt(t *testing.T) {
	pod := func(name, attempt string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{workload.LabelJob: "mnist", workload.LabelAttempt: attempt}}}
	}
	c := &Cluster{Core: fake.NewClientset(pod("mnist-a1-0", "1"), pod("mnist-a1-1", "1")), Namespace: "ns"}
	job := &v1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ns"},
		Status: v1.TrainJobStatus{Attempt: 3, PodsAttempt: 1}}
	for _, attempt := range []int32{3, 1} {
		pods, err := c.workerPods(context.Background(), job, attempt)
		if err != nil || len(pods) != 2 {
			t.Errorf("attempt %d: %d pods (%v), want attempt 1's two", attempt, len(pods), err)
		}
	}
	if pods, _ := c.workerPods(context.Background(), job, 2); len(pods) != 0 {
		t.Errorf("attempt 2, restarted in place before the current one: %d pods, want none (its logs are in the run folder)", len(pods))
	}
	job.Status.PodsAttempt = 0
	if pods, _ := c.workerPods(context.Background(), job, 3); len(pods) != 0 {
		t.Errorf("attempt 3 on pods of its own: %d of attempt 1's pods, want none", len(pods))
	}
}
