package scheduler

import (
	"fmt"
	"time"
)

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
	// Name is what messages call the job (the name its user gave it); ""
	// means the ID.
	Name string
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
	// MinWorkers makes the gang elastic when it is at least 1 and below
	// Workers: it may start, and go on, with as few as MinWorkers workers,
	// Workers being the most (see the package documentation). Zero is not
	// elastic.
	MinWorkers int
	// Queued is when the job began to wait, for State.ElasticSettle. The
	// zero time counts as having waited long enough.
	Queued time.Time
}

// Elastic reports whether the job's gang may run with fewer workers than
// Workers.
func (j Job) Elastic() bool { return j.MinWorkers >= 1 && j.MinWorkers < j.Workers }

// minWorkers is the fewest workers the job runs with: MinWorkers for an
// elastic job, else Workers.
func (j Job) minWorkers() int {
	if j.Elastic() {
		return j.MinWorkers
	}
	return j.Workers
}

// atSize returns the job with n workers, for its demand at that size.
func (j Job) atSize(n int) Job {
	j.Workers = n
	return j
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
	// Preempting is set for a job that was asked to stop (preempted, or
	// stopped by a user) and has not stopped yet. It still holds its
	// resources, so nothing starts on them, but it is expected to end now:
	// it is never preempted again, and a head of higher priority counts on
	// what it frees (see the package documentation).
	Preempting bool
	// Workers is how many workers hold resources now: fewer than Job.Workers
	// for an elastic gang that runs smaller. Zero means Job.Workers. GPUs has
	// a set for each (when it is not nil).
	Workers int
	// Resizing is set for an elastic gang that was asked to change its size
	// and has not yet: it is neither grown nor shrunk again meanwhile. With
	// ResizeTo below Workers (a shrink), the workers from ResizeTo on are
	// going away, as a preempted job is (Preempting); a grow is recorded in
	// Workers and GPUs already.
	Resizing bool
	ResizeTo int
}

// State is what the scheduler sees: a snapshot it does not modify.
type State struct {
	// Node is the machine.
	Node Node
	// Running lists the jobs that hold resources on it.
	Running []Running
	// Now is the time of the decision. The scheduler reads no clock.
	Now time.Time
	// Preemption says whether the head of the queue may preempt running
	// jobs. The zero value never preempts.
	Preemption PreemptionPolicy
	// ElasticSettle is how long an elastic job that fits with at least its
	// MinWorkers, but not with all its Workers, waits for more room before
	// it starts with what fits (counted from Job.Queued). Zero starts it at
	// once.
	ElasticSettle time.Duration
}

// PreemptionPolicy says whether the head of the queue may have running jobs
// stopped to make room for it.
type PreemptionPolicy string

// The preemption policies.
const (
	// PreemptNever: running jobs are never preempted; the head waits for
	// them to end. "" means the same.
	PreemptNever PreemptionPolicy = "never"
	// PreemptLowerPriority: the head preempts running jobs of strictly lower
	// priority when it fits once they are gone.
	PreemptLowerPriority PreemptionPolicy = "lower-priority"
)

// PreemptionPolicies lists the policies, in the order a flag's help gives
// them.
func PreemptionPolicies() []PreemptionPolicy {
	return []PreemptionPolicy{PreemptLowerPriority, PreemptNever}
}

// ParsePreemptionPolicy returns the policy named s, or an error naming the
// policies there are.
func ParsePreemptionPolicy(s string) (PreemptionPolicy, error) {
	for _, p := range PreemptionPolicies() {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown preemption policy %q: want %s or %s", s, PreemptLowerPriority, PreemptNever)
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
	// Preempt lists the running jobs to stop to make room for the head of
	// the queue, in the order they were chosen; nil when none.
	Preempt []Preemption
	// Resize lists the running elastic jobs to grow (into room nobody in the
	// queue waits for) or to shrink (toward their MinWorkers, to make room
	// for the head of the queue instead of preempting them); nil when none.
	Resize []Resize
}

// Resize is a running elastic job to run at another size. A job that
// shrinks goes on holding all its resources until it has (the caller passes
// Running.Resizing and ResizeTo meanwhile); one that grows holds the new
// ones from now on.
type Resize struct {
	// JobID is the ID of the running job.
	JobID string
	// From and To are its number of workers now and after the resize.
	From, To int
	// GPUs holds the NVML indices of each worker's GPUs after the resize:
	// those of the first To workers when it shrinks, those it holds and then
	// new ones when it grows.
	GPUs [][]int
	// For is the ID of the queued job a shrink makes room for, ForName its
	// Name ("": the ID), and ForPriority its priority; "" and 0 for a grow.
	For, ForName string
	ForPriority  int
	// Reason says why, in words: "GPUs 2,3 free", "to make room for job hi
	// (priority 5, higher than 0)".
	Reason string
}

// Shrinks reports whether the resize makes the job smaller.
func (r Resize) Shrinks() bool { return r.To < r.From }

// Preemption is a running job to stop so that the head of the queue fits.
// The job goes on holding its resources until it has stopped; the caller
// passes it as Running.Preempting meanwhile.
type Preemption struct {
	// JobID is the ID of the running job to stop.
	JobID string
	// For is the ID of the queued job it makes room for, ForName its
	// Name ("": the ID), and ForPriority that job's priority, always higher
	// than the preempted job's.
	For, ForName string
	ForPriority  int
	// Reason says why, in words: "preempted by job hi (priority 5, higher
	// than 0), which needs 2 GPUs, 1 free".
	Reason string
}

// Label is what messages call the job: its Name, or its ID.
func (j Job) Label() string {
	if j.Name != "" {
		return j.Name
	}
	return j.ID
}
