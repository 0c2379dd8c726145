package server

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/store"
)

// A Ray job that asks for a GPU gets one of this machine's, which the node and the
// metrics count while it runs. It needs an NVIDIA GPU; CI runs it on a GPU runner.
func TestRayGPUJob(t *testing.T) {
	inv, err := device.Discover(context.Background())
	if err != nil || len(inv.GPUs) == 0 {
		t.Skipf("needs an NVIDIA GPU: %s %v", inv.Source, err)
	}
	var indices []int
	for _, g := range inv.GPUs {
		indices = append(indices, g.Index)
	}
	e := newEnv(t, func(c *Config) {
		c.Node = NodeConfig{Resources: scheduler.Node{GPUs: indices, MilliCPU: 2000, MemoryBytes: 8 << 30},
			Utilization: nvmlUtilization}
	})
	id := e.raySubmitJob(map[string]any{"entrypoint_num_gpus": 1,
		"entrypoint": `echo "visible=$CUDA_VISIBLE_DEVICES"; nvidia-smi -L; sleep 2`})
	e.waitStatus(id, store.Running)

	node := decode[Node](t, e.request("GET", "/api/v1/node", nil))
	total := int64(len(indices))
	if diff := cmp.Diff(Amount{Total: total, Allocated: 1, Free: total - 1}, node.GPUs.Amount); diff != "" {
		t.Errorf("GPUs of the node while the job runs (-want +got):\n%s", diff)
	}
	if len(node.GPUs.Utilization) != len(indices) {
		t.Errorf("utilization %+v, want one entry per GPU", node.GPUs.Utilization)
	}
	got := samples(t, string(e.request("GET", "/metrics", nil).body))
	want := map[string]string{"trainyard_gpus_allocated": "1", "trainyard_gpus_total": strconv.Itoa(len(indices))}
	if diff := cmp.Diff(want, map[string]string{"trainyard_gpus_allocated": got["trainyard_gpus_allocated"],
		"trainyard_gpus_total": got["trainyard_gpus_total"]}); diff != "" {
		t.Errorf("GPU metrics (-want +got):\n%s", diff)
	}

	e.rayWait(id, "SUCCEEDED")
	logs := decode[map[string]string](t, e.request("GET", "/api/jobs/"+id+"/logs", nil))["logs"]
	if !regexp.MustCompile(`visible=[0-9]`).MatchString(logs) || !strings.Contains(logs, "GPU ") {
		t.Errorf("the job saw no GPU; logs:\n%s", logs)
	}

	// More GPUs than the machine has can never run.
	r := e.request("POST", "/api/jobs/", jsonBody(t, map[string]any{"entrypoint": "true", "entrypoint_num_gpus": len(indices) + 1}))
	wantStatus(t, r, http.StatusBadRequest)
	if msg := errorMessage(t, r); !strings.Contains(msg, "but this machine has "+strconv.Itoa(len(indices))) {
		t.Errorf("message %q", msg)
	}
}

// nvmlUtilization is the utilization hook a server on an NVIDIA machine would use.
func nvmlUtilization(ctx context.Context) ([]GPUUtilization, error) {
	inv, err := device.Discover(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]GPUUtilization, 0, len(inv.GPUs))
	for _, g := range inv.GPUs {
		out = append(out, GPUUtilization{Index: g.Index, Percent: float64(g.UtilizationPercent),
			MemoryUsedBytes: g.MemoryUsedMiB << 20, MemoryTotalBytes: g.MemoryMiB << 20})
	}
	return out, nil
}
