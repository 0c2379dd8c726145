package operator

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// An elastic gang that shrank in place (dropinplace.go) grows back in place: once there is
// room again (a lost node is ready, room probes were placed), the operator asks worker 0's
// coordinator to readmit the dropped workers (a signed workload.DropRequest at
// workload.ReadmitPath), records the gang's size and the workers still dropped, and makes
// the readmitted workers' pods in the pods' attempt (replaceLost). The gang trains on
// meanwhile; once the new pods are connected, worker 0 stops the attempt at its next
// committed checkpoint (or the resize interval after the readmit) and starts the next one
// with them, counting no restart. The workers that ran keep their pods and their spares.
// When worker 0 cannot take the request (an older image, or it does not run), the gang
// grows on new pods as before (resized), at its next checkpoint.

// readmitRoom is a decision to grow in place: the dropped workers to readmit, and why.
type readmitRoom struct {
	workers []int
	why     string
}

// toReadmit is which of the dropped workers a grow by n readmits: the lowest indices.
func (s *step) toReadmit(n int) []int {
	var out []int
	for _, w := range s.job.Status.DroppedWorkers {
		if len(out) == n {
			break
		}
		out = append(out, int(w))
	}
	return out
}

// growInPlace asks worker 0 to readmit g.workers and records it, and reports whether
// worker 0 took the request (a refusal: look again later). It returns errNoDropInPlace
// when the gang cannot grow in place (grow on new pods then).
func (s *step) growInPlace(ctx context.Context, g readmitRoom, o observation) (bool, error) {
	if len(g.workers) == 0 || o.progress == "" {
		return false, errNoDropInPlace
	}
	secret, err := s.gangKey(ctx)
	if err != nil {
		return false, err
	}
	url := strings.TrimSuffix(o.progress, workload.ProgressPath) + workload.ReadmitPath
	req := workload.DropRequest{Workers: g.workers, Reason: g.why, Attempt: int(s.job.Status.Attempt), Expires: s.now.Add(workload.DropTTL)}
	rep, code, err := s.r.sendGang(ctx, url, workload.SignReadmit, secret, req)
	switch {
	case err != nil || code == http.StatusNotFound || code == http.StatusMethodNotAllowed || code == http.StatusForbidden:
		ctrl.LoggerFrom(ctx).Info("worker 0 did not take the readmit request: growing the gang on new pods", "code", code, "err", err)
		return false, errNoDropInPlace
	case code != http.StatusOK:
		ctrl.LoggerFrom(ctx).Info("worker 0 refused the readmit request", "code", code, "error", rep.Error)
		s.requeue(staleRetry)
		return false, nil
	}
	s.readmitted(g)
	return true, nil
}

// readmitted records that worker 0 takes g.workers back: the gang's size, the workers
// still dropped, and why. A progress read under way, made before the readmit, would
// name them dropped still: it is discarded.
func (s *step) readmitted(g readmitRoom) {
	st := &s.job.Status
	from := s.gangSize()
	st.DroppedWorkers = slices.DeleteFunc(st.DroppedWorkers, func(w int32) bool { return slices.Contains(g.workers, int(w)) })
	to := from + len(g.workers)
	st.Workers = int32(to)
	if to >= s.job.Spec.WorkerCount() {
		st.Workers, st.LostNodes = 0, nil
	}
	ids := make([]string, len(g.workers))
	for i, w := range g.workers {
		ids[i] = fmt.Sprint(w)
	}
	who := fmt.Sprintf("worker %s gets a new pod in attempt %d's pod set and joins", ids[0], s.podsAttempt())
	if len(ids) > 1 {
		who = fmt.Sprintf("workers %s get new pods in attempt %d's pod set and join", strings.Join(ids, ", "), s.podsAttempt())
	}
	running := fmt.Sprintf("the %d running keep their pods and train meanwhile", from)
	if from == 1 {
		running = "the one running keeps its pod and trains meanwhile"
	}
	msg := fmt.Sprintf("resized from %d to %d workers: %s; %s the gang at its next checkpoint, "+
		"in place: %s (a resize uses no restart)", from, to, g.why, who, running)
	uid, workers := s.job.UID, slices.Clone(g.workers)
	s.announceResize(msg)
	s.afterWrite(func() { s.r.readmitting.Store(uid, workers) })
	if s.r.poller != nil {
		s.r.poller.discard(uid)
	}
}

// readmitPods tells of the pods made for readmitted workers (replaceLost), which join
// the gang at its next checkpoint: not a loss, so the gang stays Running. It reports
// whether missing were all readmitted workers.
func (s *step) readmitPods(missing []int, running, workers int) bool {
	v, ok := s.r.readmitting.Load(s.job.UID)
	if !ok || !isSubset(missing, v.([]int)) {
		return false
	}
	msg := fmt.Sprintf("attempt %d: created the pod(s) of readmitted worker(s) %v; they join the gang at its next checkpoint (%d of %d workers running)",
		s.job.Status.Attempt, missing, running, workers)
	s.job.Status.Reason = msg
	s.event(corev1.EventTypeNormal, "WorkerReadmitted", msg)
	return true
}

// readmitPending reports whether this reconcile reads a status from before a readmit it
// made (a stale cache: the status still lists a readmitted worker dropped): the gang must
// not be grown again from it. A later resize forgets the readmit (announceResize).
func (s *step) readmitPending() bool {
	v, ok := s.r.readmitting.Load(s.job.UID)
	return ok && slices.ContainsFunc(v.([]int), func(w int) bool { return slices.Contains(s.job.Status.DroppedWorkers, int32(w)) })
}

// readmitDone forgets a readmit once the status shows it and every worker runs.
func (s *step) readmitDone() {
	if !s.readmitPending() {
		s.r.readmitting.Delete(s.job.UID)
	}
}

// isSubset reports whether every element of a is in b.
func isSubset(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// growsInPlace reports whether a grow of the gang can readmit dropped workers: it shrank in
// place (or started with workers dropped), outside a Kueue queue or through Kueue's
// workload slices (slices.go).
func (s *step) growsInPlace() bool {
	return len(s.job.Status.DroppedWorkers) > 0 && (s.queueName() == "" || s.slicing())
}

// readmitStarting keeps a gang Running while the pods of its readmitted workers start (the
// others train meanwhile), and reports whether it did: worker 0 runs, nothing blocks a
// pod, and no more workers than were readmitted do not run yet.
func (s *step) readmitStarting(o observation) bool {
	v, ok := s.r.readmitting.Load(s.job.UID)
	if !ok || o.progress == "" || o.blocked != nil || o.workers-o.running > len(v.([]int)) || s.job.Status.Phase != v1.PhaseRunning {
		return false
	}
	st := &s.job.Status
	st.WorkersReady = int32(o.running)
	st.Reason = fmt.Sprintf("attempt %d: %d of %d workers running; readmitted worker(s) %v start and join the gang at its next checkpoint",
		st.Attempt, o.running, o.workers, v.([]int))
	s.pollProgress(o.progress)
	return true
}
