package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// An elastic gang whose workers cannot be scheduled shrinks in place when it can: the
// operator asks worker 0's coordinator (internal/gang), which waits for those workers, to
// go on without them (a signed workload.DropRequest), and the other workers keep their
// pods and start the next attempt renumbered, from the latest checkpoint, with their
// spares: no pod is made or deleted but the dropped workers'. The status records the
// workers dropped (status.droppedWorkers) and the gang's size (status.workers); the
// dropped workers' pods are deleted and not replaced. When worker 0 cannot take the
// request (it is among the stuck, or it does not run, or an older image), the gang is
// resized on new pods as before (resize.go). It grows back in place too (growinplace.go).

// dropTimeout bounds a drop or readmit request to worker 0.
const dropTimeout = 15 * time.Second

// errNoDropInPlace is a gang that cannot shrink in place: the operator resizes it on new
// pods.
var errNoDropInPlace = errors.New("the gang cannot shrink in place")

// newPods starts the next attempt on new pods.
func newPods(st *v1.TrainJobStatus) {
	st.Attempt, st.PodsAttempt, st.DroppedWorkers = st.Attempt+1, 0, nil
}

// podSetSize is the number of workers the pods' attempt was made for: the gang's size and
// the workers it dropped in place.
func (s *step) podSetSize() int { return s.gangSize() + len(s.job.Status.DroppedWorkers) }

// podIndexes are the indexes of the gang's workers among its pods' attempt's, in order.
func (s *step) podIndexes() []int {
	var out []int
	for i := range s.podSetSize() {
		if !slices.Contains(s.job.Status.DroppedWorkers, int32(i)) {
			out = append(out, i)
		}
	}
	return out
}

// deleteDropped deletes the pods of the workers the gang went on without and returns the
// others.
func (s *step) deleteDropped(ctx context.Context, pods []corev1.Pod) ([]corev1.Pod, error) {
	dropped := s.job.Status.DroppedWorkers
	if len(dropped) == 0 {
		return pods, nil
	}
	var kept []corev1.Pod
	for i := range pods {
		p := &pods[i]
		if !slices.Contains(dropped, int32(workerIndex(p))) {
			kept = append(kept, *p)
			continue
		}
		if p.DeletionTimestamp != nil || s.r.expect.pending(s.job.UID, deletionKey(p.UID), s.now) {
			continue
		}
		if err := s.r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete pod %s of dropped worker %d: %w", p.Name, workerIndex(p), err)
		}
		s.r.expect.add(s.job.UID, deletionKey(p.UID), s.now)
	}
	return kept, nil
}

// shrinkInPlace asks worker 0 to go on without the stuck workers of r, and records it. It
// returns errNoDropInPlace when the gang cannot shrink in place (resize on new pods then).
func (s *step) shrinkInPlace(ctx context.Context, r resize, o observation) error {
	ids := make([]int, 0, len(o.stuck))
	for _, w := range o.stuck {
		if w.worker == 0 {
			return errNoDropInPlace
		}
		ids = append(ids, w.worker)
	}
	if o.progress == "" {
		return errNoDropInPlace // worker 0 does not run (yet)
	}
	secret, err := s.gangKey(ctx)
	if err != nil {
		return err
	}
	url := strings.TrimSuffix(o.progress, workload.ProgressPath) + workload.DropPath
	req := workload.DropRequest{Workers: ids, Reason: r.why, Attempt: int(s.job.Status.Attempt), Expires: s.now.Add(workload.DropTTL)}
	rep, code, err := s.r.sendGang(ctx, url, workload.SignDrop, secret, req)
	switch {
	case err != nil || code == http.StatusNotFound || code == http.StatusMethodNotAllowed || code == http.StatusForbidden:
		ctrl.LoggerFrom(ctx).Info("worker 0 did not take the drop request: resizing the gang on new pods", "code", code, "err", err)
		return errNoDropInPlace
	case code != http.StatusOK:
		// Refused: a stuck worker connected after all, or the gang finished. Look again.
		ctrl.LoggerFrom(ctx).Info("worker 0 refused the drop request", "code", code, "error", rep.Error)
		s.requeue(staleRetry)
		return nil
	}
	s.droppedInPlace(r, ids, rep.Attempt)
	return nil
}

// droppedInPlace records that worker 0 goes on without workers ids in attempt (its
// coordinator's, which the progress read may not have shown yet): the gang's size, the
// workers dropped, the lost nodes to grow back on, and why.
func (s *step) droppedInPlace(r resize, ids []int, attempt int) {
	st := &s.job.Status
	if a := int32(attempt); a > st.Attempt {
		if st.PodsAttempt == 0 {
			st.PodsAttempt = st.Attempt
		}
		st.Attempt = a
	}
	for _, w := range ids {
		if !slices.Contains(st.DroppedWorkers, int32(w)) {
			st.DroppedWorkers = append(st.DroppedWorkers, int32(w))
		}
	}
	slices.Sort(st.DroppedWorkers)
	st.Workers = int32(r.to)
	if r.to < r.from {
		st.LostNodes = r.lost
	}
	keep := make([]string, 0, r.to)
	for _, i := range s.podIndexes() {
		keep = append(keep, fmt.Sprint(i))
	}
	msg := fmt.Sprintf("resized from %d to %d workers: %s; %s in place from the latest checkpoint (a resize uses no restart)",
		r.from, r.to, r.why, keepText(keep))
	s.announceResize(msg)
}

// absorbDropped takes into the status the workers worker 0 says it dropped that the status
// does not record (an operator that stopped between its drop request and the status
// write): their pods are then deleted, not replaced.
func (s *step) absorbDropped(sum *workload.Summary) {
	st := &s.job.Status
	for _, w := range sum.Dropped {
		if w <= 0 || w >= s.podSetSize() || slices.Contains(st.DroppedWorkers, int32(w)) {
			continue
		}
		st.Workers = int32(s.gangSize() - 1)
		st.DroppedWorkers = append(st.DroppedWorkers, int32(w))
		slices.Sort(st.DroppedWorkers)
	}
}

// gangKey reads the job's gang key from its Secret, which the job must own.
func (s *step) gangKey(ctx context.Context) ([]byte, error) {
	var sec corev1.Secret
	err := s.r.Reader.Get(ctx, client.ObjectKey{Namespace: s.job.Namespace, Name: workload.GangSecretName(s.job.Name)}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, errNoDropInPlace
	}
	if err != nil {
		return nil, fmt.Errorf("read the gang Secret: %w", err)
	}
	if !ownedBy(&metav1.PartialObjectMetadata{ObjectMeta: sec.ObjectMeta}, s.job) || len(sec.Data[workload.GangSecretKey]) == 0 {
		return nil, errNoDropInPlace
	}
	return sec.Data[workload.GangSecretKey], nil
}

// sendGang POSTs a request signed with sign (a drop's or a readmit's) and secret to url,
// and returns worker 0's reply and its status code.
func (r *Reconciler) sendGang(ctx context.Context, url string, sign func([]byte, workload.DropRequest) ([]byte, string, error),
	secret []byte, req workload.DropRequest) (workload.DropReply, int, error) {
	var rep workload.DropReply
	body, mac, err := sign(secret, req)
	if err != nil {
		return rep, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, dropTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return rep, 0, err
	}
	hreq.Header.Set(workload.DropMACHeader, mac)
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return rep, 0, err
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep)
	return rep, resp.StatusCode, nil
}

// keepText says which workers keep their pods: "worker 0 keeps its pod and goes on",
// "workers 0, 2 keep their pods and go on".
func keepText(ids []string) string {
	if len(ids) == 1 {
		return "worker " + ids[0] + " keeps its pod and goes on"
	}
	return "workers " + strings.Join(ids, ", ") + " keep their pods and go on"
}
