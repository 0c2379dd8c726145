package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/store"
)

// /metrics gives each GPU's use with the job and worker that hold it: a job's own GPUs
// and its gang's.
func TestMetricsGPUUse(t *testing.T) {
	util := func(context.Context) ([]GPUUtilization, error) {
		return []GPUUtilization{
			{Index: 0, Percent: 37, MemoryUsedBytes: 2 << 30, MemoryTotalBytes: 80 << 30},
			{Index: 1, Percent: 99, MemoryUsedBytes: 1 << 30, MemoryTotalBytes: 80 << 30},
			{Index: 2, Percent: 0, MemoryTotalBytes: 80 << 30},
		}, nil
	}
	s := &Server{cfg: Config{Node: NodeConfig{Utilization: util}}, log: slog.New(slog.DiscardHandler)}
	running := []*store.Job{
		{ID: `job-"a"`, Status: store.Running, GPUs: [][]int{{0}}},
		{ID: "driver", Status: store.Running, GPUs: [][]int{{}}, Gang: &store.Gang{Workers: 1, GPUsPerWorker: 1, GPUs: [][]int{{1}}}},
	}
	var b strings.Builder
	s.writeGPUUse(context.Background(), &b, running)
	for _, want := range []string{
		`trainyard_gpu_utilization_percent{gpu="0",job="job-\"a\"",worker="0"} 37`,
		`trainyard_gpu_utilization_percent{gpu="1",job="driver",worker="0"} 99`,
		`trainyard_gpu_utilization_percent{gpu="2",job="",worker=""} 0`,
		`trainyard_gpu_memory_used_bytes{gpu="0",job="job-\"a\"",worker="0"} 2.147483648e+09`,
		`trainyard_gpu_memory_total_bytes{gpu="2",job="",worker=""} 8.589934592e+10`,
		"# TYPE trainyard_gpu_utilization_percent gauge",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %s in:\n%s", want, b.String())
		}
	}
	// A server that cannot measure its GPUs writes none of these.
	b.Reset()
	(&Server{log: s.log}).writeGPUUse(context.Background(), &b, running)
	if b.Len() != 0 {
		t.Errorf("without a utilization hook: %s", b.String())
	}
}
