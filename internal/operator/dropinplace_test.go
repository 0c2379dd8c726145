package operator_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/operator"
	"github.com/trainyard/trainyard/internal/workload"
)

// serveDrop plays worker 0's drop endpoint: a request that verifies under p.secret is
// taken (200, and its workers are dropped in the summary served), anything else refused
// (403). p.mu is held.
func (p *progressServer) serveDrop(w http.ResponseWriter, r *http.Request) {
	p.serveGang(w, r, workload.OpenDrop, func(req workload.DropRequest) workload.DropReply {
		p.drops = append(p.drops, req)
		p.sum.Dropped = req.Workers
		return workload.DropReply{Dropped: req.Workers, Workers: 4 - len(req.Workers), Attempt: p.sum.Attempt}
	})
}

// serveGang opens a signed request of a 4-worker gang with open and answers what take
// says of it; a request that does not open is refused (403).
func (p *progressServer) serveGang(w http.ResponseWriter, r *http.Request,
	open func(secret, body []byte, mac string, now time.Time, workers int) (workload.DropRequest, error),
	take func(workload.DropRequest) workload.DropReply) {
	body, _ := io.ReadAll(r.Body)
	req, err := open(p.secret, body, r.Header.Get(workload.DropMACHeader), time.Now(), 4)
	if err != nil {
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(workload.DropReply{Error: err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(take(req))
}

// keyProgress gives p the job's gang key, once its Secret exists, so that it verifies
// the operator's requests, and has it say that attempt 1 runs.
func (k *cluster) keyProgress(name string, p *progressServer) {
	k.t.Helper()
	var sec corev1.Secret
	k.eventually("the gang Secret", func() (bool, string) {
		err := k.c.Get(context.Background(), client.ObjectKey{Namespace: k.ns, Name: workload.GangSecretName(name)}, &sec)
		return err == nil, "not yet"
	})
	p.mu.Lock()
	p.secret, p.sum = sec.Data[workload.GangSecretKey], workload.Summary{Outcome: workload.OutcomeRunning, Attempt: 1}
	p.mu.Unlock()
}

// takenDrops are the drop requests p took.
func (p *progressServer) takenDrops() []workload.DropRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.drops)
}

// An elastic 2:4 gang whose workers 2 and 3 cannot be scheduled past the settle time
// shrinks in place: the operator sends worker 0 a drop request signed with the job's gang
// key, records the workers dropped and the gang's size, deletes their pods and keeps the
// others (no new attempt's pods); worker 0's progress then says attempt 2 runs in place
// with two workers, and the job succeeds with them.
func testElasticShrinkInPlace(k *cluster) {
	t := k.t
	progress := startProgressServer(t)
	k.newJob("inplace", 4, func(j *v1.TrainJob) { j.Spec.MinWorkers = ptr(int32(2)) })
	pods := k.servePods(k.attempt("inplace", 1), progress)
	k.keyProgress("inplace", progress)
	k.waitStatus("inplace", "running", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseRunning })
	// Workers 2 and 3 lost their pods; their replacements cannot be scheduled, and worker
	// 0's coordinator waits for them in attempt 2.
	progress.set(workload.Summary{Outcome: workload.OutcomeRestarting, Attempt: 2, Reason: "worker 2 was lost", Restarts: 1, Disruptions: 1})
	k.setPod(pods[2], unschedulableSince(28*time.Second))
	k.setPod(pods[3], unschedulableSince(time.Minute))

	note := k.event("inplace", operator.ReasonResized)
	want := "resized from 4 to 2 workers: workers 2, 3 cannot be scheduled for 30s"
	if !strings.Contains(note, want) || !strings.Contains(note, "workers 0, 1 keep their pods and go on in place") {
		t.Errorf("Resized event %q; want %q, in place", note, want)
	}
	got := k.waitStatus("inplace", "2 workers, 2 dropped", func(st *v1.TrainJobStatus) bool {
		return st.Workers == 2 && slices.Equal(st.DroppedWorkers, []int32{2, 3})
	})
	if st := got.Status; st.Attempt != 2 || st.PodAttempt() != 1 {
		t.Errorf("status %+v; want attempt 2 (worker 0's reply says so) on attempt 1's pods", st)
	}
	drops := progress.takenDrops()
	if !allFor(drops, []int{2, 3}) || !strings.Contains(drops[0].Reason, "cannot be scheduled") {
		t.Errorf("drop requests worker 0 took: %+v; want them for workers 2 and 3", drops)
	}
	k.eventually("the dropped workers' pods deleted, the others kept", func() (bool, string) {
		var names []string
		for _, p := range k.pods("inplace", 1) {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		return slices.Equal(names, []string{pods[0].Name, pods[1].Name}), strings.Join(names, " ")
	})
	progress.set(workload.Summary{Outcome: workload.OutcomeRunning, Attempt: 2, Restarts: 1, Disruptions: 1, InPlace: 1,
		Dropped: []int{2, 3}, Resized: "resized from 4 to 2 workers: workers 2, 3 dropped (" + drops[0].Reason + ")",
		LastRestart: "attempt 2 restarted in place after worker 2 was lost"})
	got = k.waitStatus("inplace", "attempt 2 running in place with 2", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.Attempt == 2 && st.WorkersReady == 2 && st.Disruptions == 1
	})
	if st := got.Status; st.PodAttempt() != 1 || st.Workers != 2 || st.Restarts != 1 || st.Disruptions != 1 {
		t.Errorf("status %+v; want attempt 2 on attempt 1's pods, 2 workers, the loss's disruption only (the resize uses no restart)", st)
	}
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: k.ns, Name: workload.AttemptName("inplace", 2)}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service of attempt 2: %v; want none (the gang shrank in place)", err)
	}
	for _, p := range pods[:2] {
		k.setPod(p, exited(0, ""))
	}
	got = k.waitStatus("inplace", "succeeded", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseSucceeded })
	if st := got.Status; st.Workers != 2 || !slices.Equal(st.DroppedWorkers, []int32{2, 3}) {
		t.Errorf("succeeded status %+v", st)
	}
}
