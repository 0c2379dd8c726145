// Package seed writes job server state for benchmarks: store records as the server makes
// them, and the run folders their supervisors would have left, so that a benchmark can
// start a server on thousands of jobs without running them.
package seed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
)

// ShellJob is a TrainJob of one worker that runs command, with cpus cores (none asked
// for when 0); the server fills in the rest.
func ShellJob(cpus int, command ...string) *v1.TrainJob {
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: command}}
	job.APIVersion, job.Kind = v1.APIVersion, v1.Kind
	if cpus > 0 {
		job.Spec.Resources.CPU = resource.NewQuantity(int64(cpus), resource.DecimalSI)
	}
	return job
}

// Pending is the store record the server makes for a submitted job of one worker with 1
// CPU that runs command, its runs under dir/runs: the TrainJob defaulted as the server
// defaults it, as JSON.
func Pending(dir string, now time.Time, command ...string) (*store.Job, error) {
	id := jobs.NewID()
	job := ShellJob(1, command...)
	job.Spec.StoragePath = filepath.Join(dir, "runs")
	job.Spec.RunName = id
	workdir := filepath.Join(dir, "workdirs", id+"-1234567890")
	if err := jobspec.Default(job, jobspec.Env{WorkDir: workdir}); err != nil {
		return nil, err
	}
	if err := jobspec.Validate(job); err != nil {
		return nil, err
	}
	spec, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	return &store.Job{ID: id, Name: job.Name, Status: store.Pending, Spec: spec,
		RunDir: filepath.Join(job.Spec.StoragePath, id), SubmittedAt: now}, nil
}

// Finished is the record of a finished training job submitted at submitted: SUCCEEDED,
// or FAILED, having run ten minutes.
func Finished(dir string, submitted time.Time, failed bool) (*store.Job, error) {
	j, err := Pending(dir, submitted, "python3", "train.py", "--epochs", "3", "--lr", "0.001")
	if err != nil {
		return nil, err
	}
	started, ended := submitted.Add(2*time.Second), submitted.Add(10*time.Minute)
	j.Status, j.Message = store.Succeeded, "its one rank exited 0 in attempt 1"
	if failed {
		j.Status, j.Message = store.Failed, "rank 0 exited with status 1 in attempt 1: Traceback (most recent call last)"
	}
	j.StartedAt, j.EndedAt = &started, &ended
	return j, nil
}

// WriteRunRecord writes the run.json that a finished job's supervisor leaves in its run
// folder: one attempt of one rank, which exited 0, or 1 for a failed job.
func WriteRunRecord(j *store.Job) error {
	code, outcome, phase := 0, "succeeded", v1.PhaseSucceeded
	if j.Status == store.Failed {
		code, outcome, phase = 1, "failed", v1.PhaseFailed
	}
	rank := rundir.Rank{Log: rundir.LogPath(1, 0), PID: 4242, Started: *j.StartedAt, Ended: j.EndedAt, ExitCode: &code}
	rec := rundir.Record{Name: j.ID, Phase: phase, Reason: j.Message, Created: *j.StartedAt, Updated: *j.EndedAt,
		Finished: j.EndedAt, Attempts: []rundir.Attempt{{Number: 1, MasterAddr: "127.0.0.1", MasterPort: 29500,
			Started: *j.StartedAt, Ended: j.EndedAt, Outcome: outcome, Reason: j.Message, Ranks: []rundir.Rank{rank}}}}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(j.RunDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(j.RunDir, rundir.RecordFile), append(data, '\n'), 0o644)
}

// FinishedJobs creates n finished jobs in the state file, one store.Create each, as the
// server would have left them: 9 in 10 SUCCEEDED, the others FAILED, one a minute, each
// with a run folder that holds its run.json. each, when not nil, is called with every
// job before it is stored (to write more into its run folder).
func FinishedJobs(stateFile, dir string, n int, each func(i int, j *store.Job) error) error {
	st, err := store.Open(stateFile, store.Options{})
	if err != nil {
		return err
	}
	first := time.Now().Add(-time.Duration(n+60) * time.Minute)
	for i := range n {
		j, err := Finished(dir, first.Add(time.Duration(i)*time.Minute), i%10 == 9)
		if err == nil {
			err = WriteRunRecord(j)
		}
		if err == nil && each != nil {
			err = each(i, j)
		}
		if err == nil {
			err = st.Create(j)
		}
		if err != nil {
			_ = st.Close()
			return fmt.Errorf("seed job %d: %w", i, err)
		}
	}
	return st.Close()
}
