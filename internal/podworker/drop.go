package podworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/trainyard/trainyard/internal/gang"
	"github.com/trainyard/trainyard/internal/workload"
)

// dropWait bounds how long a drop request waits for the coordinator's loop.
const dropWait = 10 * time.Second

// serveDrop takes the operator's request to go on without some workers (a
// workload.DropRequest, signed with the gang's secret) and hands it to the gang's
// coordinator (gang.Coordinator.Drop), which starts the next attempt with the workers
// left, on their pods. It answers a workload.DropReply: 200 once the workers are dropped
// (again: a repeated request changes nothing), 409 when the coordinator refuses (a worker
// named is connected, the gang finished), 403 without a gang secret or with a MAC that
// does not verify, 400 for a request that is malformed, expired or made for earlier pods.
func (w *worker) serveDrop(rw http.ResponseWriter, r *http.Request) {
	reply := func(code int, rep workload.DropReply) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(code)
		_ = json.NewEncoder(rw).Encode(rep)
	}
	c := w.gang.coord.Load()
	if c == nil || len(w.cfg.GangSecret) == 0 {
		reply(http.StatusForbidden, workload.DropReply{Error: "this gang has no secret (or no coordinator yet): it takes no drop request"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, workload.DropMaxBody))
	if err != nil {
		reply(http.StatusBadRequest, workload.DropReply{Error: fmt.Sprintf("read the drop request: %v", err)})
		return
	}
	req, err := workload.OpenDrop(w.cfg.GangSecret, body, r.Header.Get(workload.DropMACHeader), time.Now(), c.Workers)
	switch {
	case errors.Is(err, workload.ErrDropAuth):
		w.opts.Logger.Warn("refused a drop request", "peer", r.RemoteAddr, "err", err)
		reply(http.StatusForbidden, workload.DropReply{Error: err.Error()})
		return
	case err != nil:
		reply(http.StatusBadRequest, workload.DropReply{Error: err.Error()})
		return
	case req.Attempt < c.FirstAttempt:
		reply(http.StatusBadRequest, workload.DropReply{Error: fmt.Sprintf(
			"the drop request was made for attempt %d, before these pods' attempt %d", req.Attempt, c.FirstAttempt)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), dropWait)
	defer cancel()
	err = c.Drop(ctx, req.Workers, req.Reason)
	st := c.Status()
	rep := workload.DropReply{Dropped: st.Dropped, Workers: c.Workers - len(st.Dropped), Attempt: st.Attempt}
	switch {
	case errors.Is(err, gang.ErrNotDropped):
		rep.Error = err.Error()
		reply(http.StatusConflict, rep)
	case err != nil:
		rep.Error = err.Error()
		reply(http.StatusServiceUnavailable, rep)
	default:
		reply(http.StatusOK, rep)
	}
}
