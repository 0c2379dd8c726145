package scheduler

import "time"

// now is the time of every decision in the table tests.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const gib1 = int64(1) << 30

// jobBuilder builds a Job: job("a").workers(2).gpus(1).priority(5).obj().
type jobBuilder struct{ j Job }

// job returns a builder for a one-worker job that asks for nothing.
func job(id string) *jobBuilder { return &jobBuilder{j: Job{ID: id, Workers: 1}} }

func (b *jobBuilder) workers(n int) *jobBuilder         { b.j.Workers = n; return b }
func (b *jobBuilder) gpus(n int) *jobBuilder            { b.j.PerWorker.GPUs = n; return b }
func (b *jobBuilder) cpus(cores int64) *jobBuilder      { b.j.PerWorker.MilliCPU = cores * 1000; return b }
func (b *jobBuilder) milliCPU(m int64) *jobBuilder      { b.j.PerWorker.MilliCPU = m; return b }
func (b *jobBuilder) memGiB(n int64) *jobBuilder        { b.j.PerWorker.MemoryBytes = n * gib1; return b }
func (b *jobBuilder) priority(p int) *jobBuilder        { b.j.Priority = p; return b }
func (b *jobBuilder) seq(s uint64) *jobBuilder          { b.j.Seq = s; return b }
func (b *jobBuilder) limit(d time.Duration) *jobBuilder { b.j.TimeLimit = d; return b }
func (b *jobBuilder) obj() Job                          { return b.j }

// running returns the job as running since started, its workers on the
// given GPUs.
func (b *jobBuilder) running(started time.Time, gpus ...[]int) Running {
	return Running{Job: b.j, GPUs: gpus, Started: started}
}

// nodeBuilder builds a Node: node(4).cpus(32).memGiB(256).obj().
type nodeBuilder struct{ n Node }

// node returns a builder for a node with GPUs 0 to gpus-1 and no CPU or
// memory.
func node(gpus int) *nodeBuilder {
	b := &nodeBuilder{}
	for i := range gpus {
		b.n.GPUs = append(b.n.GPUs, i)
	}
	return b
}

func (b *nodeBuilder) cpus(cores int64) *nodeBuilder { b.n.MilliCPU = cores * 1000; return b }
func (b *nodeBuilder) memGiB(n int64) *nodeBuilder   { b.n.MemoryBytes = n * gib1; return b }
func (b *nodeBuilder) obj() Node                     { return b.n }

// state returns the state of the node at now with the jobs running.
func state(n Node, running ...Running) State {
	return State{Node: n, Running: running, Now: now}
}

// gpus returns the GPU sets of a placement: gpus([]int{0, 1}, []int{2, 3}).
func gpus(perWorker ...[]int) [][]int { return perWorker }

// ago returns the time d before now.
func ago(d time.Duration) time.Time { return now.Add(-d) }

func (b *jobBuilder) elastic(min int) *jobBuilder    { b.j.MinWorkers = min; return b }
func (b *jobBuilder) queued(t time.Time) *jobBuilder { b.j.Queued = t; return b }

// runningSmaller returns the elastic job as running since started with one worker per
// GPU set given (fewer than its most).
func (b *jobBuilder) runningSmaller(started time.Time, gpus ...[]int) Running {
	return Running{Job: b.j, GPUs: gpus, Started: started, Workers: len(gpus)}
}
func (b *jobBuilder) named(name string) *jobBuilder { b.j.Name = name; return b }
