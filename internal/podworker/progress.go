package podworker

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/workload"
)

// serveProgress serves, on addr, what the worker's GPUs do now at workload.GPUsPath, and
// for worker 0 the progress (a workload.Summary with outcome "running") at
// workload.ProgressPath and the operator's drop requests at workload.DropPath (see
// serveDrop), for the operator to put in the TrainJob's status while the attempt
// runs. A port it cannot listen on is a notice, not a failure of the worker. The returned
// function stops the server.
func (w *worker) serveProgress(addr string, gpus []device.GPU) func() {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if w.primary() {
			w.console.Notice("warning: cannot serve progress to the operator (its status will show progress only when the attempt ends): " + err.Error())
		} else {
			w.opts.Logger.Warn("cannot serve the GPUs' use", "addr", addr, "err", err)
		}
		return func() {}
	}
	mux := http.NewServeMux()
	if w.primary() {
		mux.HandleFunc("GET "+workload.ProgressPath, func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(rw).Encode(w.progress())
		})
		mux.HandleFunc("POST "+workload.DropPath, w.serveDrop)
		mux.HandleFunc("POST "+workload.ReadmitPath, w.serveReadmit)
	}
	sampler := &gpuSampler{worker: w.cfg.Worker, gpus: gpus}
	mux.HandleFunc("GET "+workload.GPUsPath, func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(sampler.sample(r.Context()))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.opts.Logger.Warn("serve progress", "err", err)
		}
	}()
	return func() { _ = srv.Close() }
}

// progress is worker 0's summary of the run so far: its last report, and where the
// gang is (its attempt, its restarts in place).
func (w *worker) progress() workload.Summary {
	sum := workload.Summary{Worker: w.cfg.Worker, Outcome: workload.OutcomeRunning, RunDir: w.folder.Dir}
	w.gangProgress(&sum)
	got := w.session.Summary()
	if got.Count == 0 {
		return sum
	}
	sum.Iteration, sum.Metrics = int64(got.Last.Iteration), formatMetrics(got.Last.Metrics)
	sum.Checkpoint = got.Checkpoint
	return sum
}

// gpuSampler reads the use of a worker's GPUs from nvidia-smi, at most once per
// gpuSampleEvery however often it is asked.
type gpuSampler struct {
	worker int
	gpus   []device.GPU // the worker's GPUs, by index in the pod
	mu     sync.Mutex
	at     time.Time
	last   workload.WorkerGPUs
}

const gpuSampleEvery = 2 * time.Second

func (s *gpuSampler) sample(ctx context.Context) workload.WorkerGPUs {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.at) < gpuSampleEvery {
		return s.last
	}
	out := workload.WorkerGPUs{Worker: s.worker, GPUs: []workload.GPUSample{}}
	if len(s.gpus) > 0 {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		inv, err := device.Discover(ctx)
		if err != nil {
			out.Error = err.Error()
		}
		for _, g := range inv.GPUs {
			if slices.ContainsFunc(s.gpus, func(mine device.GPU) bool { return mine.Index == g.Index }) {
				out.GPUs = append(out.GPUs, workload.GPUSample{Index: g.Index, UUID: g.UUID, Name: g.Name,
					UtilizationPercent: g.UtilizationPercent, MemoryUsedBytes: g.MemoryUsedMiB << 20,
					MemoryTotalBytes: g.MemoryMiB << 20})
			}
		}
	}
	s.at, s.last = time.Now(), out
	return out
}
