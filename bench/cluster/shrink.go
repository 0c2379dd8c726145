package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/testcluster"
	"github.com/trainyard/trainyard/internal/workload"
)

// shrinkResult is one -shrink trial: an elastic 2:3 gang loses worker 1, whose
// replacement cannot be scheduled, and goes on with workers 0 and 2 (renumbered 0 and 1)
// once the operator's elastic settle time has passed; then the GPU it lacked is freed and
// the gang grows back to 3.
type shrinkResult struct {
	lost    time.Duration // worker 1's pod deleted → both ranks of the next attempt in the process group
	resized time.Duration // the operator recorded the resize (status.workers 2) → the same
	inPlace bool          // workers 0 and 2 kept their pods
	// freed is the GPU freed → the 3 ranks of the grown gang in the process group, grown
	// the operator's recorded grow (status.workers 0) → the same, and grewInPlace whether
	// workers 0 and 2 kept their pods through it.
	freed, grown time.Duration
	grewInPlace  bool
	note         string
}

// holderClass is the PriorityClass of the pods that hold the node's spare GPUs: above the
// workers', so that the GPU worker 1's pod frees goes to a holder, not to its replacement,
// and preempting none of them.
const holderClass = "bench-gpu-holder"

// shrinkBench runs runs trials of the elastic shrink on the node's 4 GPUs and prints each
// and their medians.
func (b *bench) shrinkBench(ctx context.Context, script string, runs int) error {
	if err := b.stageGPUScript(script); err != nil {
		return err
	}
	never := corev1.PreemptNever
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: holderClass}, Value: 1000, PreemptionPolicy: &never}
	if _, err := b.cl.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("priority class: %w", err)
	}
	var lost, resized, freed, grown []time.Duration
	for i := range runs {
		r, err := b.shrinkTrial(ctx, fmt.Sprintf("shrink-%d", i))
		if err != nil {
			return fmt.Errorf("trial %d: %w", i+1, err)
		}
		fmt.Printf("%s trial %d: worker 1 lost -> 2 ranks in the process group %6.2f s; resize recorded -> %6.2f s; in place %v; "+
			"GPU freed -> 3 ranks %6.2f s; grow recorded -> %6.2f s; in place %v; load %s%s\n",
			time.Now().UTC().Format("15:04:05"), i+1, r.lost.Seconds(), r.resized.Seconds(), r.inPlace,
			r.freed.Seconds(), r.grown.Seconds(), r.grewInPlace, loadavg(), r.note)
		lost, resized = append(lost, r.lost), append(resized, r.resized)
		freed, grown = append(freed, r.freed), append(grown, r.grown)
	}
	fmt.Printf("\nmedians of %d trials: lost -> training again %s, resize -> training again %s; freed -> training with 3 %s, grow -> training with 3 %s\n",
		runs, median(lost), median(resized), median(freed), median(grown))
	return nil
}

// shrinkTrial runs one trial: a 2:3 gang of one GPU per worker beside a pod holding the
// fourth GPU; once its 3 ranks are in the process group, a second holder waits for a GPU
// and worker 1's pod is deleted, so that the holder takes its GPU and its replacement
// stays Pending, Unschedulable. Once the gang trains with 2, the second holder is deleted,
// and the gang grows back into its GPU (the operator's room probes find it). Worker 0's
// log is kept in the shared folder.
func (b *bench) shrinkTrial(ctx context.Context, name string) (shrinkResult, error) {
	var r shrinkResult
	marks := filepath.Join(b.shared, "marks", name)
	if err := makeMarks(marks); err != nil {
		return r, err
	}
	tj := b.trainJob(name, []string{"python3", "/shared/code/ddp.py", "--marks", "/shared/marks/" + name, "--checkpoint-every", "20"})
	tj.Spec.Workers, tj.Spec.MinWorkers, tj.Spec.MaxRestarts = ptr(int32(3)), ptr(int32(2)), 3
	tj.Spec.Resources = v1.WorkerResources{GPU: 1, CPU: ptr(resource.MustParse("10m")), Memory: ptr(resource.MustParse("1Gi"))}
	tj.Spec.Kubernetes.VolumeMounts = append(tj.Spec.Kubernetes.VolumeMounts,
		corev1.VolumeMount{Name: "shared", MountPath: "/usr/local/bin", SubPath: "smi", ReadOnly: true})
	first, err := b.holdGPU(ctx, "holder-1-"+name)
	if err != nil {
		return r, err
	}
	defer b.deletePod(first)
	if err := b.submit(tj); err != nil {
		return r, err
	}
	defer b.remove(ctx, name)
	if err := poll(10*time.Minute, "3 ranks in the process group", func() bool { return len(readMarks(marks, 3, time.Time{})) == 3 }); err != nil {
		return r, err
	}
	time.Sleep(3 * time.Second)
	before := map[string]string{} // worker pods by name: their UIDs
	pods, err := b.cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: workload.LabelJob + "=" + name})
	if err != nil {
		return r, err
	}
	for _, p := range pods.Items {
		before[p.Name] = string(p.UID)
	}
	second, err := b.holdGPU(ctx, "holder-2-"+name)
	if err != nil {
		return r, err
	}
	defer b.deletePod(second)
	victim := workload.PodName(name, 1, 1)
	zero := int64(0)
	killed := time.Now()
	if err := b.cl.Client.CoreV1().Pods("default").Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return r, fmt.Errorf("delete %s: %w", victim, err)
	}
	var resizedAt time.Time
	if err := poll(5*time.Minute, "the resize to 2 workers", func() bool {
		st, err := b.status(ctx, name)
		if err == nil && st.Workers == 2 {
			resizedAt = time.Now()
		}
		return !resizedAt.IsZero()
	}); err != nil {
		return r, err
	}
	var after map[int]mark
	if err := poll(5*time.Minute, "2 ranks back in the process group", func() bool {
		after = readMarks(marks, 2, killed)
		return len(after) == 2
	}); err != nil {
		return r, err
	}
	last := latestMark(after)
	r.lost, r.resized = last.Sub(killed), last.Sub(resizedAt)
	pods, err = b.cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: workload.LabelJob + "=" + name})
	if err != nil {
		return r, err
	}
	kept := 0
	for _, p := range pods.Items {
		if uid, ok := before[p.Name]; ok && uid == string(p.UID) && p.DeletionTimestamp == nil && p.Name != victim {
			kept++
		}
	}
	r.inPlace = kept == 2
	if err := b.growTrial(ctx, name, marks, second, before, &r); err != nil {
		return r, err
	}
	if logs, err := b.cl.Client.CoreV1().Pods("default").GetLogs(workload.PodName(name, 1, 0), &corev1.PodLogOptions{Container: workload.WorkerContainer, Timestamps: true}).DoRaw(ctx); err == nil {
		_ = os.WriteFile(filepath.Join(b.shared, name+"-worker-0.log"), logs, 0o644)
	}
	return r, nil
}

// growTrial frees the GPU the gang lacks (the holder pod second) and times the gang's
// grow back to 3 workers into r: from the GPU freed, and from the grow recorded
// (status.workers 0 again), to the 3 ranks of the grown attempt in the process group;
// and whether workers 0 and 2 kept their pods from before (by name: their UIDs).
func (b *bench) growTrial(ctx context.Context, name, marks, second string, before map[string]string, r *shrinkResult) error {
	time.Sleep(3 * time.Second) // training at 2, and the operator's room probes Pending
	freed := time.Now()
	b.deletePod(second)
	var grewAt time.Time
	if err := poll(5*time.Minute, "the grow to 3 workers", func() bool {
		st, err := b.status(ctx, name)
		if err == nil && st.Workers == 0 && grewAt.IsZero() {
			grewAt = time.Now()
		}
		return !grewAt.IsZero()
	}); err != nil {
		return err
	}
	var after map[int]mark
	if err := poll(5*time.Minute, "3 ranks in the process group", func() bool {
		after = readMarks(marks, 3, freed)
		return len(after) == 3
	}); err != nil {
		return err
	}
	last := latestMark(after)
	r.freed, r.grown = last.Sub(freed), last.Sub(grewAt)
	pods, err := b.cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: workload.LabelJob + "=" + name})
	if err != nil {
		return err
	}
	kept := 0
	for _, p := range pods.Items {
		if w := workload.WorkerIndex(p.Labels); (w == 0 || w == 2) && before[p.Name] == string(p.UID) && p.DeletionTimestamp == nil {
			kept++
		}
	}
	r.grewInPlace = kept == 2
	return nil
}

// status reads the TrainJob's status.
func (b *bench) status(ctx context.Context, name string) (v1.TrainJobStatus, error) {
	raw, err := b.cl.Client.CoreV1().RESTClient().Get().AbsPath("/apis/trainyard.dev/v1alpha1/namespaces/default/trainjobs/" + name).DoRaw(ctx)
	if err != nil {
		return v1.TrainJobStatus{}, err
	}
	var tj v1.TrainJob
	if err := json.Unmarshal(raw, &tj); err != nil {
		return v1.TrainJobStatus{}, err
	}
	return tj.Status, nil
}

// holdGPU creates a pod that holds one GPU, in holderClass.
func (b *bench) holdGPU(ctx context.Context, name string) (string, error) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{PriorityClassName: holderClass, TerminationGracePeriodSeconds: ptr(int64(0)),
			Containers: []corev1.Container{{Name: "hold", Image: testcluster.WorkerImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:   []string{"python3", "-c", "import time; time.sleep(3600)"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}
	if _, err := b.cl.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("holder pod %s: %w", name, err)
	}
	return name, nil
}

// deletePod deletes a pod now and waits, briefly, until it is gone.
func (b *bench) deletePod(name string) {
	ctx := context.Background()
	zero := int64(0)
	_ = b.cl.Client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	_ = poll(time.Minute, name+" gone", func() bool {
		_, err := b.cl.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// stageGPUScript copies the DDP script to the shared folder's code/ddp.py and writes the
// stand-in nvidia-smi of the node's 4 GPUs into its smi/, which the trials' workers mount.
func (b *bench) stageGPUScript(script string) error {
	src, err := os.ReadFile(script)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.shared, "code"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.shared, "code", "ddp.py"), src, 0o644); err != nil {
		return err
	}
	return standInSMI(filepath.Join(b.shared, "smi"), 4)
}

// standInSMI writes an nvidia-smi into dir that lists n GPUs, as the test cluster's tests
// do: its nodes advertise nvidia.com/gpu with no device behind it, and a worker checks
// that it sees the GPUs its job asks for.
func standInSMI(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	script := "#!/bin/sh\ncat <<'ROWS'\n"
	for i := range n {
		script += fmt.Sprintf("%d, GPU-%08d, NVIDIA H100 80GB HBM3, 81559, 1, 0, 570.86.15\n", i, i)
	}
	return os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script+"ROWS\n"), 0o755)
}
