package scheduler

import (
	"fmt"
	"strings"
)

// Resource names a kind of resource a job asks for.
type Resource string

// The resources a job asks for.
const (
	ResourceGPUs   Resource = "GPUs"
	ResourceCPU    Resource = "CPU"
	ResourceMemory Resource = "memory"
)

// TooLargeError reports a job that asks for more of one resource than the
// machine has in all, so that it can never run there.
type TooLargeError struct {
	// Resource is the resource the job asks too much of.
	Resource Resource
	// Workers is the job's number of workers.
	Workers int
	// PerWorker is what each worker asks for: GPUs, millicores or bytes.
	PerWorker int64
	// Need is Workers x PerWorker.
	Need int64
	// Have is what the machine has in all.
	Have int64
}

// Error says what the job needs, how the need comes about, and what the
// machine has, as in "the job needs 8 GPUs (2 workers x 4) but this machine
// has 4".
func (e *TooLargeError) Error() string {
	workers := plural(int64(e.Workers), "worker")
	switch e.Resource {
	case ResourceCPU:
		return fmt.Sprintf("the job needs %s (%s x %s) but this machine has %s",
			cpus(e.Need), workers, cores(e.PerWorker), cores(e.Have))
	case ResourceMemory:
		return fmt.Sprintf("the job needs %s GiB of memory (%s x %s GiB) but this machine has %s GiB",
			gib(e.Need), workers, gib(e.PerWorker), gib(e.Have))
	default:
		return fmt.Sprintf("the job needs %s (%s x %d) but this machine has %d",
			plural(e.Need, "GPU"), workers, e.PerWorker, e.Have)
	}
}

// tooLargeErrors is a job too large in more than one resource.
type tooLargeErrors []*TooLargeError

// Error joins the messages with "; ".
func (es tooLargeErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns each *TooLargeError, for errors.As.
func (es tooLargeErrors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// CheckFits reports whether the job could ever run on the node, with
// nothing else running: it is for refusing a job when it is submitted
// rather than letting it wait forever. A job with fewer than one worker or
// a negative request gets a plain error. A job that asks for more than the
// node has gets a *TooLargeError for each resource it asks too much of (use
// errors.As); their messages are joined with "; ".
func CheckFits(n Node, j Job) error {
	if j.Workers < 1 {
		return fmt.Errorf("the job has %d workers; it needs at least 1", j.Workers)
	}
	r := j.PerWorker
	if r.GPUs < 0 || r.MilliCPU < 0 || r.MemoryBytes < 0 {
		return fmt.Errorf("the job asks for a negative amount per worker (GPUs %d, millicores %d, memory bytes %d)",
			r.GPUs, r.MilliCPU, r.MemoryBytes)
	}
	need, have := demand(j), capacity(n)
	var errs tooLargeErrors
	for _, c := range []struct {
		res             Resource
		per, need, have int64
	}{
		{ResourceGPUs, int64(r.GPUs), need.gpus, have.gpus},
		{ResourceCPU, r.MilliCPU, need.milliCPU, have.milliCPU},
		{ResourceMemory, r.MemoryBytes, need.memory, have.memory},
	} {
		if c.need > c.have {
			errs = append(errs, &TooLargeError{Resource: c.res, Workers: j.Workers,
				PerWorker: c.per, Need: c.need, Have: c.have})
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	default:
		return errs
	}
}
