package cluster

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/kubecli"
	"github.com/trainyard/trainyard/internal/kubeconfig"
	"github.com/trainyard/trainyard/internal/workload"
)

// checkWorkerGPUs reads what the GPUs of each running worker of the job do, as the dashboard
// and top job do: from nvidia-smi in the worker's pod (here the stand-in, which reports
// H100s with 81559 MiB), through the API server's pod proxy.
func checkWorkerGPUs(t *testing.T, ctx context.Context, name string, workers, gpus int) {
	t.Helper()
	c, err := kubecli.Connect(&kubeconfig.Flags{Kubeconfig: cl.Kubeconfig()}, "trainyard-test", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]workload.WorkerGPUs
	// A worker serves its GPUs once it has started its processes, a moment after its pod runs.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		d, err := c.Describe(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got = c.GPUsOf(ctx, d.Pods); len(got) == workers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the GPUs of %d running workers read, want %d: %+v", len(got), workers, got)
		}
	}
	for pod, w := range got {
		if w.Error != "" || len(w.GPUs) != gpus {
			t.Errorf("pod %s (worker %d): %d GPUs, error %q; want %d", pod, w.Worker, len(w.GPUs), w.Error, gpus)
			continue
		}
		for _, g := range w.GPUs {
			if g.Name != "NVIDIA H100 80GB HBM3" || g.MemoryTotalBytes != 81559<<20 || g.UtilizationPercent < 0 {
				t.Errorf("pod %s: GPU %+v", pod, g)
			}
		}
		t.Logf("pod %s (worker %d): %+v", pod, w.Worker, w.GPUs)
	}
	// Arena's top job NAME: each worker's GPU use on its row.
	code, out, errOut := trainyardCmd(t, ctx, "top", "job", "--kube", name)
	if code != 0 || strings.Count(out, "/"+strconv.Itoa(gpus*81559)+" MiB") != workers {
		t.Errorf("top job --kube %s: exit %d, want each of %d workers with its GPUs' memory:\n%s%s", name, code, workers, out, errOut)
	}
}
