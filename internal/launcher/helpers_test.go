package launcher

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/rundir"
)

// syncBuffer is a bytes.Buffer safe for the console's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// jobBuilder builds test jobs: makeJob(t, script).workers(2).obj().
type jobBuilder struct{ job *v1.TrainJob }

// makeJob returns a job that runs a shell script written to a temporary folder, which is
// also the job's working folder and storage path.
func makeJob(t *testing.T, script string) *jobBuilder {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "worker.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{path}, WorkingDir: dir,
		StoragePath: filepath.Join(dir, "results"), RunName: "test"}}
	return &jobBuilder{job: job}
}

func (b *jobBuilder) workers(n int32) *jobBuilder { b.job.Spec.Workers = &n; return b }
func (b *jobBuilder) procs(n int32) *jobBuilder   { b.job.Spec.ProcsPerWorker = &n; return b }
func (b *jobBuilder) restarts(n int32) *jobBuilder {
	b.job.Spec.MaxRestarts = n
	return b
}
func (b *jobBuilder) grace(s int64) *jobBuilder {
	b.job.Spec.TerminationGracePeriodSeconds = &s
	return b
}

func (b *jobBuilder) hangTimeout(s int64) *jobBuilder {
	b.job.Spec.HangTimeoutSeconds = s
	return b
}

func (b *jobBuilder) obj(t *testing.T) *v1.TrainJob {
	t.Helper()
	if err := jobspec.Default(b.job, jobspec.Env{}); err != nil {
		t.Fatal(err)
	}
	if err := jobspec.Validate(b.job); err != nil {
		t.Fatal(err)
	}
	if err := Preflight(b.job); err != nil {
		t.Fatal(err)
	}
	return b.job
}

// harness runs a job's gang on this machine and keeps its console output.
type harness struct {
	l       *Launcher
	console *logstream.Console
	out     *syncBuffer
}

func newHarness(t *testing.T, job *v1.TrainJob) *harness {
	t.Helper()
	folder, err := rundir.Open(job, rundir.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { folder.Close() })
	out := &syncBuffer{}
	console := logstream.NewConsole(out, logstream.Options{Window: -1})
	place, err := PlaceLocal(job, deviceNone())
	if err != nil {
		t.Fatal(err)
	}
	return &harness{l: &Launcher{Job: job, Placement: place, Folder: folder, Console: console}, console: console, out: out}
}

// run runs the launcher with a generous timeout and returns its result and duration.
func (h *harness) run(t *testing.T, ctx context.Context) (Result, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := h.l.Run(ctx)
	h.console.Close()
	if err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, h.out)
	}
	return res, time.Since(start)
}
