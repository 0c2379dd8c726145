package operator_test

import (
	"context"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// cloned is the status of a pod whose init container cloned commit and whose worker runs.
func cloned(commit string) func(*corev1.PodStatus) {
	return func(st *corev1.PodStatus) {
		running(st)
		st.InitContainerStatuses = []corev1.ContainerStatus{{Name: workload.InitContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0,
				Message: workload.CommitPrefix + commit}}}}
	}
}

// A job applied with a branch and no commit: the first attempt's clone is recorded and the
// restart checks it out; its TensorBoard is created, owned by the job, and removed with
// the rest after ttlSecondsAfterFinished.
func testGitAndTensorBoard(k *cluster) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	k.newJob("arena", 2, func(j *v1.TrainJob) {
		j.Spec.MaxRestarts = 1
		j.Spec.TTLSecondsAfterFinished = ptr(int64(1))
		j.Spec.Source = &v1.SourceSpec{Git: &v1.GitSource{URL: "https://git.example.com/t/mnist-pytorch.git", Branch: "main"}}
		j.Spec.Kubernetes.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "training-data"}}}}
		j.Spec.Kubernetes.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/mnist_data"}}
		j.Spec.Kubernetes.TensorBoard = &v1.TensorBoardSpec{LogDir: "/mnist_data/logs"}
	})
	var dep appsv1.Deployment
	key := client.ObjectKey{Namespace: k.ns, Name: workload.TensorBoardName("arena")}
	k.eventually("the TensorBoard Deployment", func() (bool, string) {
		err := k.c.Get(context.Background(), key, &dep)
		return err == nil, "Get: " + errText(err)
	})
	var svc corev1.Service
	if err := k.c.Get(context.Background(), key, &svc); err != nil {
		k.t.Fatalf("TensorBoard Service: %v", err)
	}
	var np networkingv1.NetworkPolicy
	if err := k.c.Get(context.Background(), key, &np); err != nil {
		k.t.Fatalf("TensorBoard's NetworkPolicy: %v", err)
	}
	if sel := np.Spec.PodSelector.MatchLabels; sel[workload.LabelTensorBoard] != "arena" || dep.Spec.Template.Labels[workload.LabelTensorBoard] != "arena" ||
		len(np.Spec.Ingress) != 0 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress || metav1.GetControllerOf(&np) == nil || metav1.GetControllerOf(&np).Name != "arena" {
		k.t.Errorf("TensorBoard's NetworkPolicy %+v: want its pods selected, owned by the job, admitting nobody (no API server address known)", np)
	}
	if owner := dep.OwnerReferences; len(owner) != 1 || owner[0].Name != "arena" || owner[0].Kind != v1.Kind {
		k.t.Errorf("the TensorBoard Deployment's owners: %+v", owner)
	}
	if note := k.event("arena", "TensorBoardCreated"); !strings.Contains(note, "kubectl port-forward -n "+k.ns+" svc/arena-tensorboard 6006:6006") {
		k.t.Errorf("TensorBoardCreated event: %q", note)
	}

	first := k.attempt("arena", 1)
	if args := first[0].Spec.InitContainers[0].Command; slices.Contains(args, "--git-rev") {
		k.t.Errorf("attempt 1 of a job with no commit pinned clones the branch's tip: %q", args)
	}
	pods := first
	for _, p := range pods {
		k.setPod(p, cloned(commit))
	}
	k.waitStatus("arena", "the cloned commit recorded", func(st *v1.TrainJobStatus) bool { return st.SourceCommit == commit })
	k.setPod(pods[1], exited(1, ""))
	second := k.attempt("arena", 2)
	if args := second[0].Spec.InitContainers[0].Command; !slices.Contains(args, commit) {
		k.t.Errorf("attempt 2 must check out the commit attempt 1 cloned: %q", args)
	}
	k.gone("arena", 1)
	for _, p := range second {
		k.setPod(p, exited(0, ""))
	}
	k.waitStatus("arena", "succeeded", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseSucceeded })
	k.eventually("the TensorBoard removed after the TTL", func() (bool, string) {
		err := k.c.Get(context.Background(), key, &appsv1.Deployment{})
		nerr := k.c.Get(context.Background(), key, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(nerr), "Get: " + errText(err) + ", " + errText(nerr)
	})
}

// A branch that moves while a gang starts: its workers clone different commits, and the
// gang restarts on the one the status records (a disruption, not the user's failure).
func testSplitClone(k *cluster) {
	const a, b = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	k.newJob("moving", 2, func(j *v1.TrainJob) {
		j.Spec.Source = &v1.SourceSpec{Git: &v1.GitSource{URL: "https://git.example.com/t/r.git", Branch: "main"}}
	})
	pods := k.attempt("moving", 1)
	k.setPod(pods[0], cloned(a))
	k.setPod(pods[1], cloned(b))
	second := k.attempt("moving", 2)
	if args := second[0].Spec.InitContainers[0].Command; !slices.Contains(args, a) {
		k.t.Errorf("attempt 2 must check out worker 0's commit: %q", args)
	}
	st := k.waitStatus("moving", "restarted", func(st *v1.TrainJobStatus) bool { return st.Restarts == 1 }).Status
	if st.SourceCommit != a || st.Disruptions != 1 || st.Restarts != 1 {
		k.t.Errorf("status after a split clone: commit %s, disruptions %d, restarts %d", st.SourceCommit, st.Disruptions, st.Restarts)
	}
	want := "attempt 1: the workers cloned different commits of the branch (it moved while they started): worker 0 aaaaaaaaaaaa, " +
		"worker 1 bbbbbbbbbbbb; restarting the gang on aaaaaaaaaaaa (set spec.source.git.revision to pin a commit)"
	if note := k.event("moving", "WorkerDisrupted"); note != want {
		k.t.Errorf("WorkerDisrupted event %q, want %q", note, want)
	}
}

// A worker whose init container could not clone (an unknown branch): the job fails with
// the clone's reason, and is not restarted, since no restart can fix it.
func testCloneFails(k *cluster) {
	k.newJob("no-branch", 1, func(j *v1.TrainJob) {
		j.Spec.MaxRestarts = 3
		j.Spec.Source = &v1.SourceSpec{Git: &v1.GitSource{URL: "https://git.example.com/t/r.git", Branch: "nope"}}
	})
	pods := k.attempt("no-branch", 1)
	k.setPod(pods[0], func(st *corev1.PodStatus) {
		st.Phase = corev1.PodFailed
		st.InitContainerStatuses = []corev1.ContainerStatus{{Name: workload.InitContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 2,
				Message: `git https://git.example.com/t/r.git has no branch "nope"; its branches: main`}}}}
	})
	got := k.waitStatus("no-branch", "failed", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseFailed })
	if !strings.Contains(got.Status.Reason, `its init container trainyard-init failed: git https://git.example.com/t/r.git has no branch "nope"`) ||
		got.Status.Restarts != 0 {
		k.t.Errorf("reason %q, restarts %d", got.Status.Reason, got.Status.Restarts)
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
