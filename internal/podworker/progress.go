package podworker

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/trainyard/trainyard/internal/workload"
)

// serveProgress serves worker 0's progress (a workload.Summary with outcome "running") at
// workload.ProgressPath on addr, for the operator to put in the TrainJob's status while the
// attempt runs. A port it cannot listen on is a notice, not a failure of the worker. The
// returned function stops the server.
func (w *worker) serveProgress(addr string) func() {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		w.console.Notice("warning: cannot serve progress to the operator (its status will show progress only when the attempt ends): " + err.Error())
		return func() {}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+workload.ProgressPath, func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(w.progress())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.opts.Logger.Warn("serve progress", "err", err)
		}
	}()
	return func() { _ = srv.Close() }
}

// progress is worker 0's summary of the run so far.
func (w *worker) progress() workload.Summary {
	sum := workload.Summary{Worker: w.cfg.Worker, Outcome: workload.OutcomeRunning, RunDir: w.folder.Dir}
	got := w.session.Summary()
	if got.Count == 0 {
		return sum
	}
	sum.Iteration, sum.Metrics = int64(got.Last.Iteration), formatMetrics(got.Last.Metrics)
	sum.Checkpoint = got.Checkpoint
	return sum
}
