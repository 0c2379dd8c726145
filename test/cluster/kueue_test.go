package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// kueueQueue creates a ResourceFlavor, a ClusterQueue with a quota of 4 GPUs that lets a
// higher priority preempt a lower one, a LocalQueue "team-a" in default and two
// PriorityClasses, low and high.
func kueueQueue(t *testing.T, ctx context.Context, cl client.Client) {
	t.Helper()
	objs := []map[string]any{
		{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": map[string]any{"name": "default"}},
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

// Real Kueue admits TrainJobs' gangs through a ClusterQueue with a GPU quota of 4: of two
// jobs asking for 4 GPUs each, the second waits Queued and starts when the first ends; a
// higher-priority job preempts a running one, which does not count that as a failure and
// resumes from its checkpoint once readmitted.
func TestKueueAdmitsAndPreemptsGangs(t *testing.T) {
	c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := c.StartKueue(ctx, os.Getenv("TRAINYARD_CLUSTER_ASSETS")); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	installOperator(t)
	kueueQueue(t, ctx, cl)
	smi := standInSMI(t)
	gpuJob := func(name, priority string, command []string, args ...string) job {
		return job{name: name, command: command, args: args, spec: "  resources: {gpu: 2}\n  maxRestarts: 0",
			mounts: "{name: shared, mountPath: /usr/local/bin, subPath: " + filepath.Base(smi) + ", readOnly: true}",
			kube:   "    queueName: team-a\n    priorityClassName: " + priority}
	}
	sleep := func(s string) []string { return []string{"python3", "-c", "import time; time.sleep(" + s + ")"} }

	t.Run("a gang waits for the quota", func(t *testing.T) {
		gpuJob("first", "low", sleep("20")).submit(t, ctx)
		waitStatus(t, "first", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Running" })
		checkWorkerGPUs(t, ctx, "first", 2, 2)
		gpuJob("second", "low", sleep("1")).submit(t, ctx)
		waitStatus(t, "second", time.Minute, func(s trainJobStatus) bool { return s.hasReason("Queued") })
		if s := getStatus(t, ctx, "first"); s.Phase != "Running" {
			t.Fatalf("first: %+v; want it still running while second waits", s)
		}
		s := waitStatus(t, "second", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" {
			t.Fatalf("second: %+v", s)
		}
		if f := getStatus(t, ctx, "first"); f.Phase != "Succeeded" {
			t.Errorf("second ran before first ended: first %+v", f)
		}
	})

	t.Run("preempted by a higher priority, resumed from the checkpoint", func(t *testing.T) {
		_ = os.MkdirAll(filepath.Join(sharedDir, "code"), 0o755)
		// Long enough that the preemption comes mid-run: the status learns of the first
		// checkpoint from the progress poll, every 30 s.
		gpuJob("low", "low", nil, "--epochs", "30", "--train-subset", "1000", "--test-subset", "200", "--sleep-per-step", "0.05").submit(t, ctx)
		waitStatus(t, "low", 5*time.Minute, func(s trainJobStatus) bool { return s.LatestCheckpoint != "" })
		gpuJob("high", "high", sleep("10")).submit(t, ctx)
		s := waitStatus(t, "low", 2*time.Minute, func(s trainJobStatus) bool { return s.Disruptions == 1 })
		if s.Phase == "Failed" || s.Restarts != 1 {
			t.Fatalf("low after preemption: %+v; want a disruption, not a failure", s)
		}
		waitStatus(t, "high", 3*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" })
		s = waitStatus(t, "low", 6*time.Minute, func(s trainJobStatus) bool { return s.Phase == "Succeeded" || s.Phase == "Failed" })
		if s.Phase != "Succeeded" || s.Attempt != 2 || s.Disruptions != 1 {
			t.Errorf("low: %+v; want Succeeded on attempt 2 after 1 disruption", s)
		}
		_, logs, _ := trainyardCmd(t, ctx, "logs", "--kube", "low")
		if !strings.Contains(logs, "resuming from checkpoint_") {
			t.Errorf("the readmitted gang did not resume from its checkpoint:\n%s", logs)
		}
		// The preempted pods' ranks heard the notice (the pods' SIGTERM) and saved at the
		// step they reached; the readmitted gang continued from that step.
		first, second := runLog(t, "low-*", 1), runLog(t, "low-*", 2)
		saved := regexp.MustCompile(`preempted \(SIGTERM\): saving epoch (\d+) at step (\d+)`).FindStringSubmatch(first)
		if saved == nil {
			t.Fatalf("the preempted gang did not save at the notice; rank 0's log of attempt 1:\n%s", first)
		}
		if want := fmt.Sprintf("epoch %s at step %s, continuing at step", saved[1], saved[2]); !strings.Contains(second, want) {
			t.Errorf("the readmitted gang did not continue from the step saved at the notice (%q); rank 0's log of attempt 2:\n%s", want, second)
		}
		t.Logf("preempted at epoch %s step %s; resumed there", saved[1], saved[2])
	})
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
