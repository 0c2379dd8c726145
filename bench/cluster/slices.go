package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/kubecli"
	"github.com/trainyard/trainyard/internal/workload"
)

// -slices measures an elastic gang in a Kueue queue that grows while it runs, through
// Kueue's workload slices (issue 22), against a gang of the grown size that waits in the
// same queue and starts when the same quota frees: what Kueue gives a job that cannot grow.
// Each trial of either kind starts a blocker (1 worker, 2 GPUs, in the queue) that holds
// half the queue's 4 GPUs, then the gang (2 GPUs per worker, 2 ranks each): the elastic
// 1:2 gang, with Kueue's elastic-job annotation, is admitted with 1 worker and trains;
// the fixed 2-worker gang waits. The blocker is then released, and the time is taken to
// the 4 ranks of the gang's next attempt in the process group.

// sliceQueue is the LocalQueue of -slices, in the ClusterQueue of 4 GPUs it creates.
const sliceQueue = "bench"

// sliceResult is one -slices trial.
type sliceResult struct {
	freed   time.Duration // the blocker released -> the gang's 4 ranks in the process group
	grown   time.Duration // the grow recorded (status.workers 0) -> the same; elastic only
	inPlace bool          // worker 0 kept its pod; elastic only
}

// slicesBench makes the queue (Kueue runs: run started it before the operator), then
// runs runs trials of each kind, alternating, and prints each and their medians.
func (b *bench) slicesBench(ctx context.Context, script string, runs int) error {
	if err := b.sliceQueueObjects(ctx); err != nil {
		return err
	}
	if err := b.stageGPUScript(script); err != nil {
		return err
	}
	var grew, started, recorded []time.Duration
	for i := range runs {
		r, err := b.sliceTrial(ctx, fmt.Sprintf("grows-%d", i), true)
		if err != nil {
			return fmt.Errorf("trial %d, elastic: %w", i+1, err)
		}
		fmt.Printf("%s trial %d: elastic 1:2 gang, blocker released -> 4 ranks %6.2f s; grow recorded -> %6.2f s; worker 0 kept its pod %v; load %s\n",
			time.Now().UTC().Format("15:04:05"), i+1, r.freed.Seconds(), r.grown.Seconds(), r.inPlace, loadavg())
		grew, recorded = append(grew, r.freed), append(recorded, r.grown)
		r, err = b.sliceTrial(ctx, fmt.Sprintf("waits-%d", i), false)
		if err != nil {
			return fmt.Errorf("trial %d, queued: %w", i+1, err)
		}
		fmt.Printf("%s trial %d: queued 2-worker gang, blocker released -> 4 ranks %6.2f s; load %s\n",
			time.Now().UTC().Format("15:04:05"), i+1, r.freed.Seconds(), loadavg())
		started = append(started, r.freed)
	}
	fmt.Printf("\nmedians of %d trials: released -> 4 ranks training: grown through a slice %s (grow recorded -> %s), "+
		"a queued gang started %s; ratio %.2f\n", runs, median(grew), median(recorded), median(started),
		float64(median(grew))/float64(median(started)))
	return nil
}

// sliceQueueObjects creates a ResourceFlavor, a ClusterQueue with a quota of 4 GPUs and
// the LocalQueue sliceQueue in default.
func (b *bench) sliceQueueObjects(ctx context.Context) error {
	kc, err := client.New(b.cl.Config, client.Options{})
	if err != nil {
		return err
	}
	objs := []map[string]any{
		{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": map[string]any{"name": "default"}},
		{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": map[string]any{"name": "gpus"},
			"spec": map[string]any{
				"namespaceSelector": map[string]any{},
				"resourceGroups": []any{map[string]any{
					"coveredResources": []any{"cpu", "memory", "nvidia.com/gpu"},
					"flavors": []any{map[string]any{"name": "default", "resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": "100"},
						map[string]any{"name": "memory", "nominalQuota": "100Gi"},
						map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "4"},
					}}},
				}},
			}},
		{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": map[string]any{"name": sliceQueue, "namespace": "default"},
			"spec": map[string]any{"clusterQueue": "gpus"}},
	}
	for _, o := range objs {
		if err := kc.Create(ctx, &unstructured.Unstructured{Object: o}); err != nil {
			return fmt.Errorf("create %s: %w", o["kind"], err)
		}
	}
	return nil
}

// queuedJob is a TrainJob in sliceQueue of workers with 2 GPUs each, its stand-in
// nvidia-smi mounted.
func (b *bench) queuedJob(name string, workers int32, command []string) *v1.TrainJob {
	tj := b.trainJob(name, command)
	tj.Spec.Workers, tj.Spec.MaxRestarts = ptr(workers), 3
	tj.Spec.Resources = v1.WorkerResources{GPU: 2, CPU: ptr(resource.MustParse("10m")), Memory: ptr(resource.MustParse("1Gi"))}
	tj.Spec.Kubernetes.QueueName = sliceQueue
	tj.Spec.Kubernetes.VolumeMounts = append(tj.Spec.Kubernetes.VolumeMounts,
		corev1.VolumeMount{Name: "shared", MountPath: "/usr/local/bin", SubPath: "smi", ReadOnly: true})
	return tj
}

// sliceTrial runs one trial: elastic, the 1:2 gang that grows through a slice; else the
// 2-worker gang that waits in the queue.
func (b *bench) sliceTrial(ctx context.Context, name string, elastic bool) (sliceResult, error) {
	var r sliceResult
	marks := filepath.Join(b.shared, "marks", name)
	if err := makeMarks(marks); err != nil {
		return r, err
	}
	release := filepath.Join(b.shared, "release-"+name)
	blocker := "blocker-" + name
	hold := fmt.Sprintf("import os, time\nwhile not os.path.exists('/shared/release-%s'): time.sleep(0.2)", name)
	if err := b.submit(b.queuedJob(blocker, 1, []string{"python3", "-c", hold})); err != nil {
		return r, err
	}
	defer b.remove(ctx, blocker)
	if err := poll(5*time.Minute, blocker+" running", func() bool {
		st, err := b.status(ctx, blocker)
		return err == nil && st.Phase == v1.PhaseRunning
	}); err != nil {
		return r, err
	}
	tj := b.queuedJob(name, 2, []string{"python3", "/shared/code/ddp.py", "--marks", "/shared/marks/" + name, "--checkpoint-every", "20"})
	if elastic {
		tj.Spec.MinWorkers = ptr(int32(1))
		tj.Annotations = map[string]string{kubecli.ElasticJobAnnotation: "true"}
	}
	if err := b.submit(tj); err != nil {
		return r, err
	}
	defer b.remove(ctx, name)
	var first string // worker 0's pod's UID
	if elastic {
		if err := poll(10*time.Minute, "worker 0's 2 ranks in the process group, admitted alone", func() bool {
			return len(readMarks(marks, 2, time.Time{})) == 2
		}); err != nil {
			return r, err
		}
		p, err := b.cl.Client.CoreV1().Pods("default").Get(ctx, workload.PodName(name, 1, 0), metav1.GetOptions{})
		if err != nil {
			return r, err
		}
		first = string(p.UID)
		if err := poll(2*time.Minute, "a checkpoint, at 1 worker", func() bool {
			st, err := b.status(ctx, name)
			return err == nil && st.LatestCheckpoint != "" && st.Workers == 1
		}); err != nil {
			return r, err
		}
	} else {
		time.Sleep(10 * time.Second) // the gang's Workload made, and pending
	}
	freed := time.Now()
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		return r, err
	}
	var (
		grewAt time.Time
		after  map[int]mark
	)
	if err := poll(10*time.Minute, "the gang's 4 ranks in the process group", func() bool {
		if elastic && grewAt.IsZero() {
			if st, err := b.status(ctx, name); err == nil && st.Workers == 0 {
				grewAt = time.Now()
			}
		}
		after = readMarks(marks, 4, freed)
		return len(after) == 4
	}); err != nil {
		return r, err
	}
	last := latestMark(after)
	r.freed = last.Sub(freed)
	if elastic {
		r.grown = last.Sub(grewAt)
		p, err := b.cl.Client.CoreV1().Pods("default").Get(ctx, workload.PodName(name, 1, 0), metav1.GetOptions{})
		r.inPlace = err == nil && string(p.UID) == first
	}
	return r, nil
}
