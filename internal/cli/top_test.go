package cli

import (
	"testing"

	"github.com/trainyard/trainyard/client"
)

// eightGPUs is a machine with 8 GPUs, 4 of them held by bert-large.
func eightGPUs() client.Node {
	n := client.Node{MilliCPU: client.Amount{Total: 64000, Allocated: 4500, Free: 59500},
		MemoryBytes: client.Amount{Total: 540 << 30, Allocated: 64 << 30, Free: 476 << 30}}
	n.GPUs.Amount = client.Amount{Total: 8, Allocated: 4, Free: 4}
	n.GPUs.Indices = []int{0, 1, 2, 3, 4, 5, 6, 7}
	for _, i := range n.GPUs.Indices {
		u := client.GPUUtilization{Index: i, MemoryTotalBytes: 80 << 30}
		if i >= 4 {
			u.Percent, u.MemoryUsedBytes = 97, 61<<30+512<<20
		}
		n.GPUs.Utilization = append(n.GPUs.Utilization, u)
	}
	return n
}

func TestPrintNodeTop(t *testing.T) {
	noGPU := client.Node{MilliCPU: client.Amount{Total: 2000, Free: 2000},
		MemoryBytes: client.Amount{Total: 8 << 30, Allocated: 512 << 20, Free: 8<<30 - 512<<20}}
	unmeasured := eightGPUs()
	unmeasured.GPUs.Utilization = nil
	cases := map[string]struct {
		node    client.Node
		running []client.Job
	}{
		"top-node":            {node: eightGPUs(), running: []client.Job{runningJob()}},
		"top-node-unmeasured": {node: unmeasured, running: []client.Job{runningJob()}},
		"top-node-no-gpu":     {node: noGPU},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, out := testView(false)
			if err := printNodeTop(v, tc.node, tc.running); err != nil {
				t.Fatal(err)
			}
			golden(t, name, out.String())
		})
	}
}

func TestPrintJobTop(t *testing.T) {
	usage := []client.JobDetail{
		{Job: runningJob(), Spec: trainJobSpec(1, 4, 4, "torchrun", "train.py")},
		{Job: pendingJob(), Spec: trainJobSpec(2, 4, 4, "python3", "big.py")},
		{Job: stoppingJob(), Spec: trainJobSpec(1, 1, 0, "python3", "sweep.py")},
	}
	rows := make([]jobUsage, len(usage))
	for i, d := range usage {
		rows[i] = newJobUsage(d)
	}
	v, out := testView(false)
	if err := printJobTop(v, rows, eightGPUs()); err != nil {
		t.Fatal(err)
	}
	golden(t, "top-job", out.String())
}
