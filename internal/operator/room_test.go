package operator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/internal/workload"
)

// A room probe keeps what the scheduler looks at and nothing of the job's.
func TestRoomProbe(t *testing.T) {
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("4")}
	worker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "j-1-w-0", Namespace: "ns", Labels: map[string]string{
			workload.LabelManagedBy: workload.ManagedBy, workload.LabelJob: "j", workload.LabelJobUID: "u1",
			workload.LabelAttempt: "2", workload.LabelWorkerIndex: "0"},
			OwnerReferences: []metav1.OwnerReference{{Name: "j", UID: "u1"}}},
		Spec: corev1.PodSpec{
			Hostname: "j-1-w-0", Subdomain: "j", NodeSelector: map[string]string{"gpu": "h100"},
			Tolerations:       []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
			PriorityClassName: "high", Priority: ptr(int32(1000)), PreemptionPolicy: ptr(corev1.PreemptLowerPriority), ServiceAccountName: "trainer",
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "gang", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "j-gang"}}}},
			InitContainers: []corev1.Container{{Name: "copy", Image: "trainyard:1", Command: []string{"cp"}}},
			Containers: []corev1.Container{{Name: "worker", Image: "pytorch:2", Command: []string{"trainyard", "worker"},
				Env:          []corev1.EnvVar{{Name: "TRAINYARD_GANG_SECRET", Value: "s"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				Resources:    corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}},
		},
	}
	p := roomProbe(worker, "j-room-0", "pause:1", "")
	if p.Name != "j-room-0" || p.Namespace != "ns" || p.OwnerReferences[0].UID != "u1" {
		t.Errorf("probe %s/%s owned by %v", p.Namespace, p.Name, p.OwnerReferences)
	}
	want := map[string]string{LabelRoomProbe: "true", workload.LabelManagedBy: workload.ManagedBy, workload.LabelJob: "j", workload.LabelJobUID: "u1"}
	if diff := cmp.Diff(want, p.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	s := p.Spec
	if s.Hostname != "" || s.Subdomain != "" || s.NodeSelector["gpu"] != "h100" || len(s.Tolerations) != 1 ||
		s.PriorityClassName != "" || len(s.Volumes) != 1 || s.Volumes[0].Name != "data" {
		t.Errorf("scheduling parts not kept as they should be: %+v", s)
	}
	if s.Priority != nil || s.PreemptionPolicy != nil || *s.AutomountServiceAccountToken ||
		*s.TerminationGracePeriodSeconds != 0 || s.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("probe may preempt, gets a token, or lingers: %+v", s)
	}
	c := s.Containers[0]
	if c.Image != "pause:1" || c.Command != nil || c.Env != nil || c.VolumeMounts != nil || !c.Resources.Requests["nvidia.com/gpu"].Equal(resource.MustParse("2")) {
		t.Errorf("container %+v; want the pause image with the worker's resources only", c)
	}
	if s.InitContainers[0].Image != "pause:1" || s.InitContainers[0].Command != nil {
		t.Errorf("init container %+v; want the pause image", s.InitContainers[0])
	}
	if worker.Spec.Containers[0].Image != "pytorch:2" {
		t.Error("the worker's pod was changed")
	}
	// With the probes' own class (trainyard install's, preemptionPolicy Never), the
	// priority admission fills in its value and policy.
	if s := roomProbe(worker, "j-room-0", "pause:1", "trainyard-operator-room-probe").Spec; s.PriorityClassName != "trainyard-operator-room-probe" ||
		s.Priority != nil || s.PreemptionPolicy != nil {
		t.Errorf("probe in its class: class %q, priority %v, policy %v", s.PriorityClassName, s.Priority, s.PreemptionPolicy)
	}
}

func TestPlanRoom(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	probe := func(node string, age time.Duration) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}, Spec: corev1.PodSpec{NodeName: node}}
	}
	type out struct {
		Create, Grow int
		Drop         bool
		Wait         time.Duration
		Nodes        []string
		AtCheckpoint bool
		Misses       int
	}
	cases := map[string]struct {
		probes     []corev1.Pod
		mem        roomMemory
		checkpoint string
		want       out
	}{
		"no probes yet: one per missing worker": {want: out{Create: 2, Wait: growPoll}},
		"no probes, a retry pending": {mem: roomMemory{next: now.Add(time.Minute), misses: 1},
			want: out{Wait: time.Minute, Misses: 1}},
		"none placed yet": {probes: []corev1.Pod{probe("", 10*time.Second), probe("", 10*time.Second)},
			want: out{Wait: 20 * time.Second}},
		"a worker lost while the round waits: its probe joins the round": {probes: []corev1.Pod{probe("", 10*time.Second)},
			want: out{Create: 2, Wait: growPoll}},
		"more placed than missing (a worker came back): grow by the missing": {
			probes: []corev1.Pod{probe("node-b", time.Minute), probe("node-b", time.Minute), probe("node-b", time.Minute)},
			mem:    roomMemory{found: shrunk{back: now.Add(-time.Minute), checkpoint: "c1"}}, checkpoint: "c2",
			want: out{Grow: 2, Drop: true, Nodes: []string{"node-b"}, AtCheckpoint: true}},
		"none placed after the settle time: drop them, retry in a minute": {probes: []corev1.Pod{probe("", time.Minute), probe("", time.Minute)},
			want: out{Drop: true, Wait: time.Minute, Misses: 1}},
		"none placed again: wait twice as long": {probes: []corev1.Pod{probe("", time.Minute)}, mem: roomMemory{misses: 1},
			want: out{Drop: true, Wait: 2 * time.Minute, Misses: 2}},
		"the wait stops growing at ten minutes": {probes: []corev1.Pod{probe("", time.Minute)}, mem: roomMemory{misses: 7},
			want: out{Drop: true, Wait: roomRetryMax, Misses: 8}},
		"after many rounds, still ten minutes": {probes: []corev1.Pod{probe("", time.Minute)}, mem: roomMemory{misses: 70},
			want: out{Drop: true, Wait: roomRetryMax, Misses: 71}},
		"one of two placed, before the settle time: wait for the other": {probes: []corev1.Pod{probe("node-b", 5*time.Second), probe("", 5*time.Second)},
			want: out{Wait: 25 * time.Second}},
		"all placed: room found, wait for the next checkpoint": {probes: []corev1.Pod{probe("node-b", 5*time.Second), probe("node-c", 5*time.Second)},
			checkpoint: "checkpoint_000004", want: out{Wait: time.Hour}},
		"a checkpoint since the room was found: grow by both": {probes: []corev1.Pod{probe("node-c", time.Minute), probe("node-b", time.Minute)},
			mem: roomMemory{found: shrunk{back: now.Add(-time.Minute), checkpoint: "checkpoint_000004"}}, checkpoint: "checkpoint_000005",
			want: out{Grow: 2, Drop: true, Nodes: []string{"node-b", "node-c"}, AtCheckpoint: true}},
		"no checkpoint for the resize interval: grow anyway": {probes: []corev1.Pod{probe("node-b", 2*time.Hour), probe("node-b", 2*time.Hour)},
			mem: roomMemory{found: shrunk{back: now.Add(-time.Hour), checkpoint: "checkpoint_000004"}}, checkpoint: "checkpoint_000004",
			want: out{Grow: 2, Drop: true, Nodes: []string{"node-b"}}},
		"one of two placed after the settle time: grow by one": {probes: []corev1.Pod{probe("node-b", time.Minute), probe("", time.Minute)},
			mem: roomMemory{found: shrunk{back: now.Add(-time.Minute), checkpoint: "c1"}}, checkpoint: "c2",
			want: out{Grow: 1, Drop: true, Nodes: []string{"node-b"}, AtCheckpoint: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, mem := planRoom(tc.probes, 2, tc.mem, tc.checkpoint, 30*time.Second, time.Hour, now)
			got := out{Create: p.create, Grow: p.grow, Drop: p.drop, Wait: p.wait, Nodes: p.nodes, AtCheckpoint: p.atCheckpoint, Misses: mem.misses}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("planRoom (-want +got):\n%s", diff)
			}
		})
	}
}
