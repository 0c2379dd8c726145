package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
)

// This file is the one place that converts the store's and the run folder's types to the
// native API's wire types.

// decodeSpec reads a stored job's TrainJob.
func decodeSpec(j *store.Job) (*v1.TrainJob, error) {
	var job v1.TrainJob
	if err := json.Unmarshal(j.Spec, &job); err != nil {
		return nil, fmt.Errorf("job %s: decode its spec: %w", j.ID, err)
	}
	return &job, nil
}

// toJob converts a stored job.
func toJob(j *store.Job) Job {
	workers, minWorkers, resources := gang(j)
	maxWorkers := 0
	if minWorkers > 0 {
		maxWorkers = workers
		if n := len(j.GPUs); n > 0 && j.Status == store.Running {
			workers = n
		}
	}
	var resizing *Resizing
	if r := j.Resize; r != nil {
		resizing = &Resizing{From: r.From, To: r.To, Reason: r.Reason}
	}
	return Job{MinWorkers: minWorkers, MaxWorkers: maxWorkers, Resizes: j.Resizes, Resizing: resizing, ID: j.ID, Name: j.Name, Status: JobStatus(j.Status), Message: j.Message, Priority: j.Priority,
		Entrypoint: j.Entrypoint, SubmittedBy: j.SubmittedBy, Metadata: j.Metadata, RuntimeEnv: j.RuntimeEnv, SecretEnv: j.SecretEnv, Workers: workers, Resources: resources,
		GPUs: j.GPUs, RunDir: j.RunDir, StopRequested: j.StopRequested, SubmittedAt: j.SubmittedAt,
		StartedAt: j.StartedAt, EndedAt: j.EndedAt, Version: j.Version, Gang: toGang(j.Gang),
		Restarts: j.Restarts, Preemptions: j.Preemptions, Preempting: j.Preempting(), Preemption: toPreemption(j.Preemption)}
}

// toPreemption converts a stored job's latest preemption.
func toPreemption(p *store.Preemption) *Preemption {
	if p == nil {
		return nil
	}
	return &Preemption{For: p.For, ForPriority: p.ForPriority, At: p.At, Requeued: p.Requeued, Resumed: p.Resumed}
}

// toGang converts a stored job's gang lease.
func toGang(g *store.Gang) *Gang {
	if g == nil {
		return nil
	}
	return &Gang{Workers: g.Workers, GPUsPerWorker: g.GPUsPerWorker, MilliCPUPerWorker: g.MilliCPUPerWorker,
		MemoryBytesPerWorker: g.MemoryBytesPerWorker, Granted: g.GPUs != nil, GPUs: g.GPUs}
}

// gang reads the number of workers, an elastic gang's fewest (0 for another), and what
// each asks for from a stored job's spec, and only those (a list of many jobs decodes
// this much of each); 0, 0 and nil for a spec that does not decode.
func gang(j *store.Job) (int, int, *v1.WorkerResources) {
	var doc struct {
		Spec struct {
			Workers    *int32             `json:"workers"`
			MinWorkers *int32             `json:"minWorkers"`
			Resources  v1.WorkerResources `json:"resources"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(j.Spec, &doc); err != nil {
		return 0, 0, nil
	}
	workers, minWorkers := 1, 0
	if doc.Spec.Workers != nil {
		workers = int(*doc.Spec.Workers)
	}
	if m := doc.Spec.MinWorkers; m != nil && int(*m) < workers {
		minWorkers = int(*m)
	}
	return workers, minWorkers, &doc.Spec.Resources
}

// RunOf converts a run record.
func RunOf(rec rundir.Record) *Run {
	run := &Run{Phase: rec.Phase, Reason: rec.Reason, Created: rec.Created, Updated: rec.Updated, SourceCommit: rec.SourceCommit,
		Finished: rec.Finished, Attempts: make([]Attempt, 0, len(rec.Attempts))}
	for _, a := range rec.Attempts {
		att := Attempt{Number: a.Number, MasterAddr: a.MasterAddr, MasterPort: a.MasterPort, Started: a.Started,
			Ended: a.Ended, Outcome: a.Outcome, Reason: a.Reason, Ranks: make([]Rank, 0, len(a.Ranks))}
		for _, r := range a.Ranks {
			att.Ranks = append(att.Ranks, Rank{Rank: r.Rank, Worker: r.Worker, LocalRank: r.LocalRank, PID: r.PID,
				GPUs: r.GPUs, Log: r.Log, Started: r.Started, Ended: r.Ended, ExitCode: r.ExitCode, Signal: r.Signal,
				StoppedByTrainyard: r.StoppedByTrainyard, Error: r.Error})
		}
		run.Attempts = append(run.Attempts, att)
	}
	return run
}

// ResultOf converts a reported result.
func ResultOf(r reporting.Result) *Result {
	return &Result{Iteration: r.Iteration, Timestamp: r.Timestamp, TimeThisIterS: r.TimeThisIterS,
		TimeTotalS: r.TimeTotalS, Attempt: r.Attempt, Checkpoint: r.Checkpoint, Metrics: Metrics(r.Metrics)}
}

// toDetail converts a stored job and reads what its run folder holds: the run record, the
// last result and the checkpoints. A run folder that lacks them (the job has not started)
// leaves them out.
func toDetail(j *store.Job) (JobDetail, error) {
	spec, err := decodeSpec(j)
	if err != nil {
		return JobDetail{}, err
	}
	d := JobDetail{Job: toJob(j), Spec: spec}
	if j.RunDir == "" {
		return d, nil
	}
	if rec, err := rundir.ReadRecord(j.RunDir); err == nil {
		d.Run = RunOf(rec)
	}
	results := j.RunDir
	if gang, ok := rundir.GangRun(j.RunDir); ok {
		results, d.GangRunDir = gang, gang
	}
	last, ok, err := reporting.LastResult(results)
	if err != nil {
		return JobDetail{}, fmt.Errorf("job %s: %w", j.ID, err)
	}
	if ok {
		d.Results = ResultOf(last)
	}
	d.Checkpoints, err = CheckpointNames(results)
	if err != nil {
		return JobDetail{}, fmt.Errorf("job %s: %w", j.ID, err)
	}
	return d, nil
}

// committedCheckpoint matches the name of a committed checkpoint's folder.
var committedCheckpoint = regexp.MustCompile(`^checkpoint_[0-9]{6,}$`)

// CheckpointNames lists the committed checkpoints of a run folder, those with a manifest,
// in order. It only reads: checkpoint.Open would create the folder's staging area and
// remove what is in it, which is a commit in progress while the job runs.
func CheckpointNames(runDir string) ([]string, error) {
	entries, err := os.ReadDir(runDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() || !committedCheckpoint.MatchString(e.Name()) {
			continue
		}
		if _, err := os.Stat(filepath.Join(runDir, e.Name(), checkpoint.ManifestName)); err == nil {
			names = append(names, e.Name())
		}
	}
	// By index: names of the same length sort as their indices, shorter ones first.
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) })
	return names, nil
}
