package client

import "github.com/trainyard/trainyard/internal/server"

// The native API's wire types, as the server defines them.
type (
	// SubmitRequest is the body of a submission: the TrainJob, an optional ID and priority.
	SubmitRequest = server.SubmitRequest
	// Job is a job as the server keeps it.
	Job = server.Job
	// Gang is the gang a running job's own process leased GPUs for.
	Gang = server.Gang
	// Preemption is a job's latest preemption by the server.
	Preemption = server.Preemption
	// Resizing is a running elastic gang's resize under way.
	Resizing = server.Resizing
	// JobStatus is a job's state: PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED.
	JobStatus = server.JobStatus
	// JobList is a page of the job list and how many jobs match in all.
	JobList = server.JobList
	// JobDetail is a job with its spec, run record, last result and checkpoints.
	JobDetail = server.JobDetail
	// Run is what happened to a job's run: its attempts, each with its ranks.
	Run = server.Run
	// Attempt is one start of a job's whole gang.
	Attempt = server.Attempt
	// Rank is one worker process of an attempt.
	Rank = server.Rank
	// Result is the last iteration a job reported.
	Result = server.Result
	// Checkpoints are the checkpoints a job committed.
	Checkpoints = server.Checkpoints
	// Checkpoint is one checkpoint a job committed, kept or deleted.
	Checkpoint = server.Checkpoint
	// ResultList is a job's results, thinned to a maximum.
	ResultList = server.ResultList
	// Metrics are reported values by name.
	Metrics = server.Metrics
	// Node is what the server's machine offers to jobs and what running jobs hold.
	Node = server.Node
	// Amount is how much of a resource the machine offers, running jobs hold, and is free.
	Amount = server.Amount
	// GPUUtilization is one GPU's current use.
	GPUUtilization = server.GPUUtilization
)

// The statuses of a job.
const (
	StatusPending   = server.StatusPending
	StatusRunning   = server.StatusRunning
	StatusStopped   = server.StatusStopped
	StatusSucceeded = server.StatusSucceeded
	StatusFailed    = server.StatusFailed
)

// Ended reports whether a job in status s has ended: STOPPED, SUCCEEDED or FAILED.
func Ended(s JobStatus) bool {
	return s == StatusStopped || s == StatusSucceeded || s == StatusFailed
}
