package jobs

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/store"
)

// schedJob is what the scheduler needs to know of a job; messages call it by its name
// (schedule sets it).
func schedJob(id string, priority int, seq uint64, job *v1.TrainJob) scheduler.Job {
	r := job.Spec.Resources
	per := scheduler.Resources{GPUs: int(r.GPU)}
	if r.CPU != nil {
		per.MilliCPU = r.CPU.MilliValue()
	}
	if r.Memory != nil {
		per.MemoryBytes = r.Memory.Value()
	}
	sj := scheduler.Job{ID: id, Priority: priority, Seq: seq, Workers: job.Spec.WorkerCount(), PerWorker: per}
	if job.Spec.MinWorkers != nil {
		sj.MinWorkers = job.Spec.MinWorkerCount()
	}
	return sj
}

// ceilDiv is a/b rounded up, for b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// queuedSince is when a pending job began to wait: when it was submitted, or queued
// again after a preemption.
func queuedSince(j *store.Job) time.Time {
	if p := j.Preemption; p != nil && p.Requeued != nil && p.Requeued.After(j.SubmittedAt) {
		return *p.Requeued
	}
	return j.SubmittedAt
}

// decodeSpec reads a stored job's TrainJob.
func decodeSpec(j *store.Job) (*v1.TrainJob, error) {
	var job v1.TrainJob
	if err := json.Unmarshal(j.Spec, &job); err != nil {
		return nil, fmt.Errorf("job %s: decode spec: %w", j.ID, err)
	}
	return &job, nil
}

// reconcile starts the pending jobs the scheduler places and grants the leases of
// running jobs' gangs it places, preempts the running jobs it says must make room for the
// head of the queue, and records why the others wait.
func (s *Service) reconcile() {
	s.checkRunning()
	pending, err := s.cfg.Store.List(store.Filter{Statuses: []store.Status{store.Pending}})
	if err != nil {
		s.log.Error("list pending jobs", "err", err)
		return
	}
	state, owners, gangs, err := s.state()
	if err != nil {
		s.log.Error("read running jobs", "err", err)
		return
	}
	if len(pending) == 0 && len(gangs) == 0 && !s.mayGrow(state) {
		return
	}
	queue := make([]scheduler.Job, 0, len(pending)+len(gangs))
	byID, gangByName := map[string]*store.Job{}, map[string]*store.Job{}
	for _, j := range pending {
		spec, err := decodeSpec(j)
		if err != nil {
			s.fail(j.ID, err.Error())
			continue
		}
		sj := schedJob(j.ID, j.Priority, j.Seq, spec)
		sj.Name, sj.Queued = j.Name, queuedSince(j)
		queue = append(queue, sj)
		byID[j.ID] = j
	}
	for _, j := range gangs {
		if name := gangName(j.ID); byID[name] == nil { // a job named like a gang waits a round
			queue = append(queue, gangJob(j))
			gangByName[name] = j
		}
	}
	d := scheduler.Schedule(state, queue)
	for _, p := range d.Start {
		if j := gangByName[p.JobID]; j != nil {
			s.grantLease(j, p.GPUs)
		} else {
			s.start(byID[p.JobID], p.GPUs)
		}
	}
	for id, reason := range d.Waiting {
		if j := gangByName[id]; j != nil {
			s.leaseWaits(j, reason)
		} else if j := byID[id]; j != nil {
			if msg := waitingMessage(j, reason); j.Message != msg {
				s.setMessage(id, msg)
			}
		}
	}
	for _, r := range d.Resize {
		s.resize(r)
	}
	for _, p := range d.Preempt {
		forID := p.For
		if j := gangByName[p.For]; j != nil {
			forID = j.ID
			p.ForName = gangName(cmp.Or(j.Name, j.ID))
		}
		s.preempt(owners[p.JobID], forID, p)
	}
}

// state is the scheduler's view: this machine, the running jobs and the gangs they hold,
// those being stopped (by a user or a preemption) marked as such. It also returns the
// running job each of the scheduler's running IDs belongs to (a gang's is its job's: a
// preempted gang's job is stopped, and both go), and the running jobs whose gang waits
// for its GPUs, forgetting those whose process no longer waits (it asked before this
// server started).
func (s *Service) state() (scheduler.State, map[string]string, []*store.Job, error) {
	running, err := s.cfg.Store.List(store.Filter{Statuses: []store.Status{store.Running}})
	if err != nil {
		return scheduler.State{}, nil, nil, err
	}
	st := scheduler.State{Node: s.cfg.Node, Now: time.Now(), Preemption: s.cfg.Preemption, ElasticSettle: s.cfg.ElasticSettle}
	owners := make(map[string]string, len(running))
	var waiting []*store.Job
	for _, j := range running {
		spec, err := decodeSpec(j)
		if err != nil {
			continue
		}
		started := time.Now()
		if j.StartedAt != nil {
			started = *j.StartedAt
		}
		stopping := j.StopRequested || j.Preempting()
		sj := schedJob(j.ID, j.Priority, j.Seq, spec)
		sj.Name = j.Name
		if j.Gang != nil { // its process waits on its gang: its CPU and memory are lent to it
			w := int64(max(1, sj.Workers))
			milli, mem := j.Gang.DriverHolds(w*sj.PerWorker.MilliCPU, w*sj.PerWorker.MemoryBytes)
			sj.PerWorker.MilliCPU, sj.PerWorker.MemoryBytes = ceilDiv(milli, w), ceilDiv(mem, w)
		}
		r := scheduler.Running{Job: sj, GPUs: j.GPUs, Started: started, Preempting: stopping, Workers: len(j.GPUs)}
		if j.Resize != nil {
			r.Resizing, r.ResizeTo = true, j.Resize.To
		}
		st.Running = append(st.Running, r)
		owners[j.ID] = j.ID
		switch {
		case j.Gang == nil:
		case j.Gang.GPUs != nil:
			st.Running = append(st.Running, scheduler.Running{Job: gangJob(j), GPUs: j.Gang.GPUs, Started: j.Gang.RequestedAt,
				Preempting: stopping})
			owners[gangName(j.ID)] = j.ID
		case s.leases.waiter(j.ID) == nil:
			s.dropStaleLease(j)
		default:
			waiting = append(waiting, j)
		}
	}
	return st, owners, waiting, nil
}

func (s *Service) setMessage(id, msg string) {
	_, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Status == store.Pending {
			j.Message = msg
		}
		return nil
	})
	if err != nil {
		s.log.Warn("record waiting reason", "job", id, "err", err)
	}
}

// fail marks a job failed for good.
func (s *Service) fail(id, msg string) {
	now := time.Now()
	_, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		j.Status, j.Message, j.EndedAt, j.SupervisorPID = store.Failed, msg, &now, 0
		return nil
	})
	if err != nil {
		s.log.Error("mark job failed", "job", id, "err", err)
	}
}

// mayGrow reports whether a running elastic gang could grow: it is below its most
// workers and not resizing already. The scheduler then runs even with an empty queue.
func (s *Service) mayGrow(st scheduler.State) bool {
	for _, r := range st.Running {
		if r.Job.Elastic() && !r.Resizing && !r.Preempting && r.Workers < r.Job.Workers {
			return true
		}
	}
	return false
}
