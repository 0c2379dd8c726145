package kubecli

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/internal/workload"
)

func TestPodState(t *testing.T) {
	worker := func(s corev1.ContainerState) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: "sidecar"}, {Name: workload.WorkerContainer, State: s}}
	}
	deleting := metav1.Now()
	cases := map[string]struct {
		pod         corev1.Pod
		state, want string
	}{
		"running": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: worker(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})}}, state: "Running"},
		"image pull": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: worker(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}})}},
			state: "ImagePullBackOff", want: "no such image"},
		"oom": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: worker(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}})}},
			state: "OOMKilled (exit 137)"},
		"init container": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: workload.InitContainer,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "trainyard image"}}}},
			ContainerStatuses: worker(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}})}},
			state: "Init:ErrImagePull", want: "trainyard image"},
		"unschedulable": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}}},
			state: "Unschedulable", want: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
		"evicted": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}},
			state: "Evicted", want: "low on memory"},
		"terminating":  {pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleting}}, state: "Terminating"},
		"just created": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, state: "Pending"},
	}
	for name, tc := range cases {
		state, msg := podState(&tc.pod)
		if state != tc.state || msg != tc.want {
			t.Errorf("%s: podState = %q, %q; want %q, %q", name, state, msg, tc.state, tc.want)
		}
	}
}

// A pod requests what its containers request added up (a limit stands for a missing
// request), the largest init container's where that is more, and its overhead.
func TestPodRequests(t *testing.T) {
	q := resource.MustParse
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("12"), corev1.ResourceMemory: q("1Gi")}}}},
		Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: q("4"), corev1.ResourceMemory: q("64Gi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("8"), corev1.ResourceMemory: q("32Gi")}}},
			{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("512Mi")}}},
		},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: q("250m")},
	}}
	got := podRequests(p)
	if gpus(got) != 4 || amount(got, corev1.ResourceCPU) != 12250 || amount(got, corev1.ResourceMemory) != 32<<30+512<<20 {
		t.Errorf("podRequests: GPUs %d, CPU %dm, memory %d", gpus(got), amount(got, corev1.ResourceCPU), amount(got, corev1.ResourceMemory))
	}
}
