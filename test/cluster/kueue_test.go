package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/internal/testcluster"
)

// standInSMI writes, into the shared folder, a stand-in nvidia-smi that reports four
// GPUs, for pods to mount at /usr/local/bin: the node's GPUs are advertised (extended
// resources), not real, and `trainyard worker` checks that a pod sees the GPUs it asked for.
func standInSMI(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(sharedDir, "smi")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncat <<'ROWS'\n"
	for i := range gpus {
		script += string(rune('0'+i)) + ", GPU-0000000" + string(rune('0'+i)) + ", NVIDIA H100 80GB HBM3, 81559, 1, 0, 570.86.15\n"
	}
	script += "ROWS\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kueueQueue creates a ResourceFlavor (with a node label and a toleration), a ClusterQueue with a quota of 4 GPUs that lets a
// higher priority preempt a lower one, a LocalQueue "team-a" in default and two
// PriorityClasses, low and high.
func kueueQueue(t *testing.T, ctx context.Context, cl client.Client) {
	t.Helper()
	objs := []map[string]any{
		// Its node label and toleration go into the pods of the gangs it admits.
		{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": map[string]any{"name": "default"},
			"spec": map[string]any{"nodeLabels": map[string]any{"kubernetes.io/os": "linux"},
				"tolerations": []any{map[string]any{"key": "trainyard.dev/kueue-test", "operator": "Exists", "effect": "NoSchedule"}}}},
		{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": map[string]any{"name": "gpus"},
			"spec": map[string]any{
				"namespaceSelector": map[string]any{},
				"preemption":        map[string]any{"withinClusterQueue": "LowerPriority"},
				"resourceGroups": []any{map[string]any{
					"coveredResources": []any{"cpu", "memory", "nvidia.com/gpu"},
					"flavors": []any{map[string]any{"name": "default", "resources": []any{
						map[string]any{"name": "cpu", "nominalQuota": "100"},
						map[string]any{"name": "memory", "nominalQuota": "100Gi"},
						map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "4"},
					}}},
				}},
			}},
		{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": map[string]any{"name": "team-a", "namespace": "default"},
			"spec": map[string]any{"clusterQueue": "gpus"}},
		{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": map[string]any{"name": "low"}, "value": int64(100)},
		{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": map[string]any{"name": "high"}, "value": int64(1000)},
	}
	for _, o := range objs {
		if err := cl.Create(ctx, &unstructured.Unstructured{Object: o}); err != nil {
			t.Fatalf("create %s: %v", o["kind"], err)
		}
	}
}

// jobWorkloads lists the Kueue Workloads controlled by the TrainJob name.
func jobWorkloads(t *testing.T, ctx context.Context, kc client.Client, name string) []unstructured.Unstructured {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	l.SetKind("WorkloadList")
	if err := kc.List(ctx, l, client.InNamespace("default")); err != nil {
		t.Fatalf("list Workloads: %v", err)
	}
	var out []unstructured.Unstructured
	for _, wl := range l.Items {
		if ref := metav1.GetControllerOf(&wl); ref != nil && ref.Kind == "TrainJob" && ref.Name == name {
			out = append(out, wl)
		}
	}
	return out
}

// workloadCondition returns a condition of a Workload, or nil.
func workloadCondition(wl *unstructured.Unstructured, kind string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == kind {
			return m
		}
	}
	return nil
}

// Real Kueue (TrainJob as an external framework) admits each TrainJob as one Workload that
// the operator makes, through a ClusterQueue with a GPU quota of 4: a gang whose rank fails
// restarts with its admission (one Workload, admitted all along), while a second gang with
// no room waits with Kueue's reason and starts when the first ends; a higher-priority job
// preempts a running one, which does not count that as a failure and resumes from its
// checkpoint, at the step it reached, once readmitted, on the same Workload.
func TestKueueWorkloadPerTrainJob(t *testing.T) {
	c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := c.StartKueue(ctx, os.Getenv("TRAINYARD_CLUSTER_ASSETS")); err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(c.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	installOperator(t)
	kueueQueue(t, ctx, kc)
	smi := standInSMI(t)
	gpuJob := func(name, priority string, restarts int, command []string, args ...string) job {
		return job{name: name, command: command, args: args, spec: fmt.Sprintf("  resources: {gpu: 2}\n  maxRestarts: %d", restarts),
			mounts: "{name: shared, mountPath: /usr/local/bin, subPath: " + filepath.Base(smi) + ", readOnly: true}",
			kube:   "    queueName: team-a\n    priorityClassName: " + priority}
	}
	sleep := func(s string) []string { return []string{"python3", "-c", "import time; time.sleep(" + s + ")"} }

	t.Run("a restart keeps the admission; a gang with no room waits with Kueue's reason", func(t *testing.T) {
		// Rank 1 fails in the first attempt: the gang restarts (in place) and succeeds.
		flaky := []string{"python3", "-c", "import os, sys, time; " +
			"print('cpu', os.environ['TRAINYARD_WORKER_MILLICPU'], 'omp', os.environ['OMP_NUM_THREADS'], flush=True); time.sleep(15); " +
			"sys.exit(3 if os.environ['TRAINYARD_ATTEMPT'] == '1' and os.environ['RANK'] == '1' else 0)"}
		gpuJob("flaky", "low", 1, flaky).submit(t, ctx)
		waitStatus(t, "flaky", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		checkWorkerGPUs(t, ctx, "flaky", 2, 2)
		pods, err := cl.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "trainyard.dev/job-name=flaky"})
		if err != nil || len(pods.Items) != 2 {
			t.Fatalf("flaky's pods: %v (%d)", err, len(pods.Items))
		}
		for _, p := range pods.Items {
			tolerated := slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == "trainyard.dev/kueue-test" })
			if p.Spec.NodeSelector["kubernetes.io/os"] != "linux" || !tolerated {
				t.Errorf("pod %s lacks the admitted flavor's placement: nodeSelector %v tolerations %v", p.Name, p.Spec.NodeSelector, p.Spec.Tolerations)
			}
			// The job names no CPU or memory: its 2 GPUs each bring the operator's requests per GPU.
			cpu, mem := resource.MustParse(testcluster.WorkerCPUPerGPU), resource.MustParse(testcluster.WorkerMemoryPerGPU)
			cpu.Mul(2)
			mem.Mul(2)
			if r := p.Spec.Containers[0].Resources.Requests; !r.Cpu().Equal(cpu) || !r.Memory().Equal(mem) {
				t.Errorf("pod %s requests %v; want cpu %s and memory %s (2 GPUs x the operator's --worker-*-per-gpu)", p.Name, r, &cpu, &mem)
			}
		}
		// second is queued by Kueue's label on the TrainJob rather than spec.kubernetes.queueName.
		second := gpuJob("second", "low", 0, sleep("1"))
		second.kube, second.labels = "    priorityClassName: low", "kueue.x-k8s.io/queue-name: team-a"
		second.submit(t, ctx)
		s := waitStatus(t, "second", time.Minute, func(s trainJobStatus) bool { return s.hasReason("Queued") && strings.Contains(s.Reason, "quota") })
		if !strings.HasPrefix(s.Reason, "waiting: Kueue admitted 0 of 2 workers (") {
			t.Errorf("second waits with reason %q; want Kueue's, as 'waiting: Kueue admitted 0 of 2 workers (...)'", s.Reason)
		}
		t.Logf("second: %s", s.Reason)
		if n := len(jobWorkloads(t, ctx, kc, "second")); n != 1 {
			t.Errorf("second has %d Workloads; want 1", n)
		}

		// flaky's one Workload stays admitted, since the same moment, until the job ends.
		var admittedAt any
		deadline := time.Now().Add(4 * time.Minute)
		for {
			st := getStatus(t, ctx, "flaky")
			if st.Phase == "Succeeded" || st.Phase == "Failed" {
				if st.Phase != "Succeeded" || st.Restarts != 1 || st.Attempt != 2 {
					t.Fatalf("flaky: %+v; want Succeeded in attempt 2 after 1 restart", st)
				}
				break
			}
			wls := jobWorkloads(t, ctx, kc, "flaky")
			if len(wls) != 1 {
				t.Fatalf("flaky has %d Workloads during its run; want exactly 1", len(wls))
			}
			adm := workloadCondition(&wls[0], "Admitted")
			if adm == nil || adm["status"] != "True" {
				if now := getStatus(t, ctx, "flaky"); now.Phase != "Succeeded" {
					t.Fatalf("flaky's Workload is not admitted while it runs (attempt %d): %v", now.Attempt, wls[0].Object["status"])
				}
			} else if admittedAt == nil {
				admittedAt = adm["lastTransitionTime"]
			} else if adm["lastTransitionTime"] != admittedAt {
				t.Fatalf("flaky's Workload was admitted again (%v, first %v): a restart must keep the admission", adm["lastTransitionTime"], admittedAt)
			}
			if time.Now().After(deadline) {
				t.Fatalf("flaky did not end: %+v", st)
			}
			time.Sleep(time.Second)
		}
		// The downward API gave each worker its container's CPU request (2 x 100m), which
		// its 2 processes share as OMP_NUM_THREADS (at least 1), not the node's cores.
		if _, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "flaky"); !strings.Contains(logs, "cpu 200 omp 1") {
			t.Errorf("flaky's ranks do not print their CPU request and OMP_NUM_THREADS as 'cpu 200 omp 1':\n%s", logs)
		}
		// The operator marks the Workload Finished in the reconcile after the one that
		// recorded the job's end (finished, in reconciler.go): wait for it.
		for finishBy := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			wls := jobWorkloads(t, ctx, kc, "flaky")
			if len(wls) == 1 && workloadCondition(&wls[0], "Finished") != nil {
				break
			}
			if time.Now().After(finishBy) {
				t.Errorf("flaky's Workload is not Finished 30s after the job succeeded: %v", wls)
				break
			}
		}
		// Its quota is free: second runs.
		s = waitStatus(t, "second", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" {
			t.Fatalf("second: %+v", s)
		}
	})

	t.Run("an elastic gang runs with what Kueue's partial admission gives it", func(t *testing.T) {
		// 2 to 3 workers of 2 GPUs (2 ranks each), in a quota of 4: Kueue admits 2 workers,
		// so the world is 4 ranks, not 6.
		world := []string{"python3", "-c", "import os, time; print('world', os.environ['WORLD_SIZE'], flush=True); time.sleep(5)"}
		elastic := gpuJob("elastic", "low", 0, world)
		elastic.workers, elastic.spec = 3, elastic.spec+"\n  minWorkers: 2"
		elastic.submit(t, ctx)
		s := waitStatus(t, "elastic", 4*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" || s.Workers != 2 || !strings.Contains(s.Reason, "all 2 workers succeeded") {
			t.Fatalf("elastic: %+v; want Succeeded with the 2 workers Kueue admitted", s)
		}
		_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "elastic")
		if !strings.Contains(logs, "world 4") || strings.Contains(logs, "world 6") {
			t.Errorf("the ranks' WORLD_SIZE is not 4 (2 workers of 2 ranks):\n%s", logs)
		}
		_, described, _ := trainyardCmd(t, ctx, "describe", "--kube", "elastic")
		if !strings.Contains(described, "2:3 x 2 processes") || !strings.Contains(described, "running with 2, as Kueue admitted") {
			t.Errorf("describe does not say the gang's range and size:\n%s", described)
		}
		if n := len(jobWorkloads(t, ctx, kc, "elastic")); n != 1 {
			t.Errorf("elastic has %d Workloads; want 1", n)
		}
	})

	t.Run("an elastic gang in a queue shrinks when the node has less room than the quota", func(t *testing.T) {
		// A pod outside Kueue holds 2 of the node's 4 GPUs: Kueue admits both workers of
		// 1:2 (2 GPUs each) within its quota of 4, but the scheduler places only one. After
		// the settle time the gang goes on with worker 0 in place (its coordinator stops
		// waiting for worker 1) and the operator gives Kueue the other's quota back through
		// the Workload's status.reclaimablePods.
		holder := busyboxPod("kueue-gpu-holder", "sleep 3600")
		holder.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
		holder.Spec.PriorityClassName = "high" // the gang's workers (low) cannot preempt it
		if _, err := cl.Client.CoreV1().Pods("default").Create(ctx, holder, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer deletePod(cl.Client, holder.Name)
		waitPod(t, cl.Client, holder.Name, 2*time.Minute, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		world := []string{"python3", "-c", "import os, time; print('world', os.environ['WORLD_SIZE'], flush=True); time.sleep(20)"}
		shrinks := gpuJob("shrinks", "low", 0, world)
		shrinks.workers, shrinks.spec = 2, shrinks.spec+"\n  minWorkers: 1"
		shrinks.submit(t, ctx)
		waitStatus(t, "shrinks", 3*time.Minute, func(s trainJobStatus) bool { return s.Workers == 1 })
		resizedEvent(t, ctx, "shrinks", "resized from 2 to 1 workers: worker 1 cannot be scheduled for 30s")
		resizedEvent(t, ctx, "shrinks", "worker 0 keeps its pod and goes on in place")
		waitFor(t, "Kueue's Workload to give 1 worker's quota back", 2*time.Minute, func() bool {
			wls := jobWorkloads(t, ctx, kc, "shrinks")
			if len(wls) != 1 {
				return false
			}
			rp, _, _ := unstructured.NestedSlice(wls[0].Object, "status", "reclaimablePods")
			return len(rp) == 1 && rp[0].(map[string]any)["name"] == "workers" && rp[0].(map[string]any)["count"] == int64(1)
		})
		s := waitStatus(t, "shrinks", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" || s.Workers != 1 || s.Restarts != 0 {
			t.Fatalf("shrinks: %+v; want Succeeded with 1 worker, no restart used", s)
		}
		_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "shrinks")
		if !strings.Contains(logs, "world 2") || strings.Contains(logs, "world 4") {
			t.Errorf("the ranks' WORLD_SIZE is not 2 (1 worker of 2 ranks):\n%s", logs)
		}
	})

	t.Run("an elastic gang grows through a Kueue workload slice when quota frees", func(t *testing.T) {
		// blocker holds 2 of the queue's 4 GPUs until the test releases it, so Kueue admits
		// 1 of the 2 workers (2 GPUs each) of grows, 1:2 with Kueue's annotation for
		// workload slices (Kueue runs with ElasticJobsViaWorkloadSlices here). Running, grows
		// asks for more through a second slice; once blocker ends, Kueue replaces grows's
		// Workload with it, admitting both workers, and worker 1 joins the gang in place.
		release := filepath.Join(sharedDir, "release-blocker")
		_ = os.Remove(release)
		hold := []string{"python3", "-c", "import os, time\nwhile not os.path.exists('/shared/release-blocker'): time.sleep(0.5)"}
		blocker := gpuJob("blocker", "low", 0, hold)
		blocker.workers = 1
		blocker.submit(t, ctx)
		deleteAtEnd(t, "blocker")
		waitStatus(t, "blocker", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		grows := gpuJob("grows", "low", 0, nil, "--epochs", "200", "--train-subset", "2000", "--test-subset", "200", "--sleep-per-step", "0.1")
		grows.spec += "\n  minWorkers: 1\n  resizeIntervalSeconds: 30"
		grows.notes = `kueue.x-k8s.io/elastic-job: "true"`
		grows.submit(t, ctx)
		deleteAtEnd(t, "grows")
		waitStatus(t, "grows", 4*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" && s.Workers == 1 })
		first := runningWorkers(t, ctx, "grows", 1, 3*time.Minute)
		waitFor(t, "grows's second Workload slice", time.Minute, func() bool { return len(jobWorkloads(t, ctx, kc, "grows")) == 2 })
		waitStatus(t, "grows", 4*time.Minute, func(s trainJobStatus) bool { return s.LatestCheckpoint != "" })

		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		freed := time.Now()
		resizedEvent(t, ctx, "grows", "resized from 1 to 2 workers: Kueue admitted 2 workers through Workload slice")
		t.Logf("grow recorded %s after blocker was released", time.Since(freed).Round(time.Second))
		resizedEvent(t, ctx, "grows", "worker 1 gets a new pod in attempt 1's pod set and joins the gang at its next checkpoint, in place")
		s := waitStatus(t, "grows", 5*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" && s.Workers == 0 && s.Attempt > 1 })
		two := runningWorkers(t, ctx, "grows", 2, 3*time.Minute)
		if two[0].UID != first[0].UID {
			t.Errorf("worker 0 runs in pod %s after the grow; want its pod from the start kept", two[0].Name)
		}
		waitRunLog(t, "grows-*", s.Attempt, "world_size=4", "resized_from=2", "resuming from checkpoint_")
		t.Logf("training with 2 workers in attempt %d, %s after blocker was released", s.Attempt, time.Since(freed).Round(time.Second))
		if s.Restarts != 0 {
			t.Errorf("status %+v; want the grow to use no restart", s)
		}
		wls := jobWorkloads(t, ctx, kc, "grows")
		slices.SortFunc(wls, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
		if len(wls) != 2 {
			t.Fatalf("grows has %d Workloads; want its 2 slices", len(wls))
		}
		if f := workloadCondition(&wls[0], "Finished"); f == nil || f["reason"] != "WorkloadSliceReplaced" {
			t.Errorf("grows's first slice is not Finished as WorkloadSliceReplaced: %v", wls[0].Object["status"])
		}
		if a := workloadCondition(&wls[1], "Admitted"); a == nil || a["status"] != "True" || admittedCount(&wls[1]) != 2 {
			t.Errorf("grows's second slice is not admitted with 2 workers: %v", wls[1].Object["status"])
		}
	})

	t.Run("preempted by a higher priority, resumed from the checkpoint", func(t *testing.T) {
		_ = os.MkdirAll(filepath.Join(sharedDir, "code"), 0o755)
		// Long enough that the preemption comes mid-run: the status learns of the first
		// checkpoint from the progress poll, every 30 s.
		gpuJob("low", "low", 0, nil, "--epochs", "30", "--train-subset", "1000", "--test-subset", "200", "--sleep-per-step", "0.05").submit(t, ctx)
		waitStatus(t, "low", 5*time.Minute, func(s trainJobStatus) bool { return s.LatestCheckpoint != "" })
		before := jobWorkloads(t, ctx, kc, "low")
		gpuJob("high", "high", 0, sleep("10")).submit(t, ctx)
		s := waitStatus(t, "low", 2*time.Minute, func(s trainJobStatus) bool { return s.Disruptions == 1 })
		if s.Phase == "Failed" || s.Restarts != 1 {
			t.Fatalf("low after preemption: %+v; want a disruption, not a failure", s)
		}
		waitStatus(t, "high", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" })
		s = waitStatus(t, "low", 6*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" || s.Attempt != 2 || s.Disruptions != 1 {
			t.Errorf("low: %+v; want Succeeded on attempt 2 after 1 disruption", s)
		}
		after := jobWorkloads(t, ctx, kc, "low")
		if len(before) != 1 || len(after) != 1 || before[0].GetUID() != after[0].GetUID() {
			t.Errorf("low must keep one Workload through its preemption: %d before, %d after", len(before), len(after))
		} else if rq := workloadCondition(&after[0], "Requeued"); rq == nil || rq["reason"] != "Preempted" {
			t.Errorf("low's Workload was not requeued after its preemption: %v", after[0].Object["status"])
		}
		_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "low")
		if !strings.Contains(logs, "resuming from checkpoint_") {
			t.Errorf("the readmitted gang did not resume from its checkpoint:\n%s", logs)
		}
		// The preempted pods' ranks heard the notice (the pods' SIGTERM) and saved at the
		// step they reached; the readmitted gang continued from that step.
		first, second := runLog(t, "low-*", 1), runLog(t, "low-*", 2)
		// Rank 0 heard it from its own pod's SIGTERM, or through the gang from another
		// worker's pod that got its SIGTERM first ("on another machine").
		saved := regexp.MustCompile(`preempted \((SIGTERM|on another machine)\): saving epoch (\d+) at step (\d+)`).FindStringSubmatch(first)
		if saved == nil {
			t.Fatalf("the preempted gang did not save at the notice; rank 0's log of attempt 1:\n%s", first)
		}
		if want := fmt.Sprintf("epoch %s at step %s, continuing at step", saved[2], saved[3]); !strings.Contains(second, want) {
			t.Errorf("the readmitted gang did not continue from the step saved at the notice (%q); rank 0's log of attempt 2:\n%s", want, second)
		}
		t.Logf("preempted (%s) at epoch %s step %s; resumed there", saved[1], saved[2], saved[3])
	})
}

// admittedCount is how many workers Kueue's admission of wl counts, 0 when none.
func admittedCount(wl *unstructured.Unstructured) int64 {
	sets, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	for _, a := range sets {
		if m, _ := a.(map[string]any); m["name"] == "workers" {
			n, _, _ := unstructured.NestedInt64(m, "count")
			return n
		}
	}
	return 0
}

// runLog returns rank 0's log of an attempt of the run whose folder under the shared
// storage path matches pattern (the newest, if several).
func runLog(t *testing.T, pattern string, attempt int) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(sharedDir, "results", pattern))
	var newest string
	var at time.Time
	for _, d := range dirs {
		if info, err := os.Stat(d); err == nil && info.ModTime().After(at) {
			newest, at = d, info.ModTime()
		}
	}
	data, err := os.ReadFile(filepath.Join(newest, "logs", fmt.Sprintf("attempt-%d", attempt), "rank-0.log"))
	if err != nil {
		t.Fatalf("rank 0's log of attempt %d in %s: %v", attempt, newest, err)
	}
	return string(data)
}
