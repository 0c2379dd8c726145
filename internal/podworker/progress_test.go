package podworker

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// progressScript reports once with a checkpoint, then waits for the test's go-ahead.
const progressScript = `
import os, time, trainyard
folder = trainyard.new_checkpoint_dir()
open(os.path.join(folder, "state"), "w").write("x")
trainyard.report({"loss": 0.5}, checkpoint=folder)
while not os.path.exists(os.environ["GO_AHEAD"]):
    time.sleep(0.02)
`

// While the attempt runs, worker 0 serves its progress: the last iteration, its metrics
// and the latest checkpoint; and what its GPU does, from nvidia-smi (a stand-in here that
// shows two GPUs, of which the worker has the first).
func TestProgressWhileRunning(t *testing.T) {
	goAhead := filepath.Join(t.TempDir(), "go")
	job := pythonJob(t, progressScript, v1.EnvVar{Name: "GO_AHEAD", Value: goAhead})
	one := int32(1)
	job.Spec.Workers = &one
	job.Spec.Resources.GPU = 1
	smi := t.TempDir()
	rows := "0, GPU-0000, NVIDIA H100 80GB HBM3, 81559, 1024, 37, 570.86.15\n1, GPU-0001, NVIDIA H100 80GB HBM3, 81559, 0, 0, 570.86.15\n"
	if err := os.WriteFile(filepath.Join(smi, "nvidia-smi"), []byte("#!/bin/sh\nprintf '"+rows+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", smi+":"+os.Getenv("PATH"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	gangAddr := freeAddr(t)
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out := &syncBuffer{}
		cfg := Config{Job: job, Attempt: 1, Worker: 0, MasterAddr: "127.0.0.1", MasterPort: 29500, ProgressAddr: addr, GangAddr: gangAddr}
		sum, err := Run(ctx, cfg, Options{Out: out})
		done <- outcome{sum: sum, err: err, out: out}
	}()
	var got workload.Summary
	for deadline := time.Now().Add(30 * time.Second); got.Iteration == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no progress with an iteration from http://%s%s; last %+v", addr, workload.ProgressPath, got)
		}
		resp, err := http.Get("http://" + addr + workload.ProgressPath)
		if err != nil {
			continue
		}
		_ = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
	}
	if got.Outcome != workload.OutcomeRunning || got.Metrics["loss"] != "0.5" || got.Checkpoint != "checkpoint_000001" || got.Attempt != 1 {
		t.Errorf("progress %+v", got)
	}
	resp, err := http.Get("http://" + addr + workload.GPUsPath)
	if err != nil {
		t.Fatal(err)
	}
	var gpus workload.WorkerGPUs
	_ = json.NewDecoder(resp.Body).Decode(&gpus)
	resp.Body.Close()
	want := workload.GPUSample{Index: 0, UUID: "GPU-0000", Name: "NVIDIA H100 80GB HBM3", UtilizationPercent: 37,
		MemoryUsedBytes: 1024 << 20, MemoryTotalBytes: 81559 << 20}
	if gpus.Worker != 0 || gpus.Error != "" || len(gpus.GPUs) != 1 || gpus.GPUs[0] != want {
		t.Errorf("GPUs %+v, want only the worker's GPU: %+v", gpus, want)
	}
	if err := os.WriteFile(goAhead, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || res.sum.Outcome != "succeeded" {
		t.Fatalf("worker: %+v %v\n%s", res.sum, res.err, res.out)
	}
	if _, err := http.Get("http://" + addr + workload.ProgressPath); err == nil {
		t.Error("the progress server still answers after the worker ended")
	}
}
