package scheduler

import "time"

// Resources is what one worker of a job asks for. The zero value asks for
// nothing, which fits anywhere.
type Resources struct {
	// GPUs is the number of whole GPUs the worker needs.
	GPUs int
	// MilliCPU is CPU in thousandths of a core: 1500 is one and a half
	// cores. Zero asks for none.
	MilliCPU int64
	// MemoryBytes is memory in bytes. Zero asks for none.
	MemoryBytes int64
}

// Node is the machine jobs are placed on: what it offers to jobs in all.
type Node struct {
	// GPUs lists the NVML indices of the GPUs jobs may use, in any order;
	// an index listed twice counts once.
	GPUs []int
	// MilliCPU is the CPU jobs may use, in thousandths of a core.
	MilliCPU int64
	// MemoryBytes is the memory jobs may use, in bytes.
	MemoryBytes int64
}

// Job is a job that asks to run.
type Job struct {
	// ID names the job. IDs are unique within a queue and among running
	// jobs.
	ID string
	// Priority orders the queue: higher first.
	Priority int
	// Seq is the job's place in submit order: among jobs of equal priority,
	// lower first.
	Seq uint64
	// Workers is the number of workers in the gang; they start together or
	// not at all.
	Workers int
	// PerWorker is what each worker needs.
	PerWorker Resources
	// TimeLimit is how long the job may run. Zero (or less) means unknown:
	// the job runs until it ends by itself.
	TimeLimit time.Duration
}

// Running is a job that holds resources on the node.
type Running struct {
	// Job is the job as it was started.
	Job Job
	// GPUs holds the NVML indices of each worker's GPUs.
	GPUs [][]int
	// Started is when the job started. With Job.TimeLimit it gives the time
	// the job is expected to end by.
	Started time.Time
}

// State is what the scheduler sees: a snapshot it does not modify.
type State struct {
	// Node is the machine.
	Node Node
	// Running lists the jobs that hold resources on it.
	Running []Running
	// Now is the time of the decision. The scheduler reads no clock.
	Now time.Time
}

// Placement says where a starting job's workers go.
type Placement struct {
	// JobID is the ID of the job to start.
	JobID string
	// GPUs holds the NVML indices of each worker's GPUs, worker 0 first.
	// The sets are disjoint and free; a worker without GPUs gets an empty
	// (not nil) slice.
	GPUs [][]int
}

// Decision is the scheduler's answer.
type Decision struct {
	// Start lists the jobs to start now, in the order they were chosen.
	Start []Placement
	// Waiting maps the ID of every queued job that does not start to the
	// reason, in words. It is never nil.
	Waiting map[string]string
}
