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
	w.serveMembership(rw, r, gangRequest{kind: "drop", open: workload.OpenDrop, refused: gang.ErrNotDropped,
		apply: func(ctx context.Context, c *gang.Coordinator, req workload.DropRequest) error {
			return c.Drop(ctx, req.Workers, req.Reason)
		}})
}

// serveReadmit takes the operator's request to take dropped workers back (signed as a
// readmit) and hands it to the coordinator (gang.Coordinator.Readmit): they join the gang
// at its next attempt, which starts, while one runs, once they are connected and the next
// checkpoint is committed (growWhen). It answers as serveDrop does; 409 when the
// coordinator refuses (the gang finished).
func (w *worker) serveReadmit(rw http.ResponseWriter, r *http.Request) {
	w.serveMembership(rw, r, gangRequest{kind: "readmit", open: workload.OpenReadmit, refused: gang.ErrNotReadmitted,
		apply: func(ctx context.Context, c *gang.Coordinator, req workload.DropRequest) error {
			return c.Readmit(ctx, req.Workers, req.Reason)
		}})
}

// gangRequest is a kind of signed request that changes the gang's workers.
type gangRequest struct {
	kind    string
	open    func(secret, body []byte, mac string, now time.Time, workers int) (workload.DropRequest, error)
	apply   func(context.Context, *gang.Coordinator, workload.DropRequest) error
	refused error // what apply's error wraps when the coordinator refuses
}

// serveMembership checks a signed request of kind g and applies it to the coordinator.
func (w *worker) serveMembership(rw http.ResponseWriter, r *http.Request, g gangRequest) {
	reply := func(code int, rep workload.DropReply) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(code)
		_ = json.NewEncoder(rw).Encode(rep)
	}
	c := w.gang.coord.Load()
	if c == nil || len(w.cfg.GangSecret) == 0 {
		reply(http.StatusForbidden, workload.DropReply{Error: fmt.Sprintf("this gang has no secret (or no coordinator yet): it takes no %s request", g.kind)})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, workload.DropMaxBody))
	if err != nil {
		reply(http.StatusBadRequest, workload.DropReply{Error: fmt.Sprintf("read the %s request: %v", g.kind, err)})
		return
	}
	req, err := g.open(w.cfg.GangSecret, body, r.Header.Get(workload.DropMACHeader), time.Now(), c.Workers)
	switch {
	case errors.Is(err, workload.ErrDropAuth):
		w.opts.Logger.Warn("refused a "+g.kind+" request", "peer", r.RemoteAddr, "err", err)
		reply(http.StatusForbidden, workload.DropReply{Error: err.Error()})
		return
	case err != nil:
		reply(http.StatusBadRequest, workload.DropReply{Error: err.Error()})
		return
	case req.Attempt < c.FirstAttempt:
		reply(http.StatusBadRequest, workload.DropReply{Error: fmt.Sprintf(
			"the %s request was made for attempt %d, before these pods' attempt %d", g.kind, req.Attempt, c.FirstAttempt)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), dropWait)
	defer cancel()
	err = g.apply(ctx, c, req)
	st := c.Status()
	rep := workload.DropReply{Dropped: st.Dropped, Workers: c.Workers - len(st.Dropped) - len(st.Joining), Attempt: st.Attempt}
	switch {
	case errors.Is(err, g.refused):
		rep.Error = err.Error()
		reply(http.StatusConflict, rep)
	case err != nil:
		rep.Error = err.Error()
		reply(http.StatusServiceUnavailable, rep)
	default:
		reply(http.StatusOK, rep)
	}
}
