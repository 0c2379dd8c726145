package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/launcher"
	"github.com/trainyard/trainyard/internal/preempt"
)

// resizePoll is how often a job server's supervisor of an elastic gang looks at its
// resize request file.
const resizePoll = 250 * time.Millisecond

// followResizes passes on the resize requests a job server writes for this run
// (preempt.EnvResize) to the launcher, each once; nothing is sent when the variable is
// not set. The variable is the server's, not the job's processes'.
func followResizes(ctx context.Context, job *v1.TrainJob, log *slog.Logger) <-chan launcher.Resize {
	out := make(chan launcher.Resize, 1)
	path, ok := os.LookupEnv(preempt.EnvResize)
	_ = os.Unsetenv(preempt.EnvResize)
	if !ok || path == "" {
		return out
	}
	var seen int64 // the server removes the file before it starts a supervisor: all are for this one
	go poll(ctx, resizePoll, func() bool {
		r, ok, err := preempt.ReadResize(path)
		if err != nil {
			log.Warn("read a resize request", "err", err)
			return false
		}
		if !ok || r.Seq == seen {
			return false
		}
		seen = r.Seq
		rz, err := resizeOf(ctx, job, r)
		if err != nil {
			log.Warn("ignored a resize request", "err", err)
			return false
		}
		select { // a newer request replaces one not yet taken
		case <-out:
		default:
		}
		out <- rz
		return false
	})
	return out
}

// resizeOf turns a server's request into the launcher's: the GPUs by NVML index, as
// discovery reports them (not limited by this supervisor's CUDA_VISIBLE_DEVICES, which
// names the GPUs it started with).
func resizeOf(ctx context.Context, job *v1.TrainJob, r preempt.ResizeRequest) (launcher.Resize, error) {
	if min := job.Spec.MinWorkerCount(); len(r.GPUs) < min {
		return launcher.Resize{}, fmt.Errorf("%d workers, fewer than the gang's fewest (%d)", len(r.GPUs), min)
	}
	var byIndex map[int]device.GPU
	if job.Spec.Resources.GPU > 0 {
		inv, err := device.Discover(ctx)
		if err != nil {
			return launcher.Resize{}, fmt.Errorf("discover GPUs: %w", err)
		}
		byIndex = map[int]device.GPU{}
		for _, g := range inv.GPUs {
			byIndex[g.Index] = g
		}
	}
	out := launcher.Resize{Reason: r.Reason, Now: r.Now}
	for w, ids := range r.GPUs {
		slot := launcher.Slot{Worker: w, GPUs: []device.GPU{}}
		for _, id := range ids {
			g, ok := byIndex[id]
			if !ok {
				return launcher.Resize{}, fmt.Errorf("worker %d: no GPU with index %d here", w, id)
			}
			slot.GPUs = append(slot.GPUs, g)
		}
		out.Slots = append(out.Slots, slot)
	}
	return out, nil
}

// startWith makes an elastic gang start with n workers (--start-workers), between its
// fewest and its most, and returns its most; 0 leaves the gang as it is.
func startWith(job *v1.TrainJob, n int) (maxWorkers int, err error) {
	s := &job.Spec
	if n == 0 {
		return 0, nil
	}
	if s.MinWorkers == nil || s.MinWorkerCount() >= s.WorkerCount() {
		return 0, fmt.Errorf("--start-workers %d: the gang is not elastic; give --workers MIN:MAX", n)
	}
	if n < s.MinWorkerCount() || n > s.WorkerCount() {
		return 0, fmt.Errorf("--start-workers %d: give between %d and %d (--workers %d:%d)",
			n, s.MinWorkerCount(), s.WorkerCount(), s.MinWorkerCount(), s.WorkerCount())
	}
	maxWorkers = s.WorkerCount()
	k := int32(n)
	s.Workers = &k
	return maxWorkers, nil
}
