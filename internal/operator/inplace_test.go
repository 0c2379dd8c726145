package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/operator"
	"github.com/trainyard/trainyard/internal/workload"
)

// progressServer plays worker 0's progress endpoint with a summary the test sets. It
// listens on the port a worker serves progress on (the operator reads it from the pod,
// whose spec it made), at a loopback address of its own, which the test gives the pod.
type progressServer struct {
	ip  string
	mu  sync.Mutex
	sum workload.Summary
	// secret, once set, verifies the drop requests it takes (see serveDrop); drops are
	// those it took.
	secret   []byte
	drops    []workload.DropRequest
	readmits []workload.DropRequest
}

func startProgressServer(t *testing.T) *progressServer {
	t.Helper()
	var ln net.Listener
	var err error
	for range 20 {
		ip := fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(250), rand.IntN(250), 1+rand.IntN(250))
		if ln, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(workload.ProgressPort))); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	p := &progressServer{ip: ln.Addr().(*net.TCPAddr).IP.String(), sum: workload.Summary{Outcome: workload.OutcomeRunning}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.Method == http.MethodPost && r.URL.Path == workload.DropPath {
			p.serveDrop(w, r)
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == workload.ReadmitPath {
			p.serveReadmit(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(p.sum)
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

func (p *progressServer) set(s workload.Summary) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sum = s
}

// servePods reports the pods running, worker 0's progress served by p.
func (k *cluster) servePods(pods []*corev1.Pod, p *progressServer) []*corev1.Pod {
	k.t.Helper()
	for _, pod := range pods {
		k.setPod(pod, func(st *corev1.PodStatus) {
			running(st)
			st.PodIP = p.ip
		})
	}
	return pods
}

// The gang restarts in place on its pods, as worker 0's progress says: the status goes
// Restarting, then Running in attempt 2 with one restart used, on attempt 1's pods, and
// Events say so. A pod that fails then makes the operator recreate the gang as attempt 3,
// telling it the restarts used so far; when the gang says it failed for good (no restarts
// left in place), the job fails without another attempt.
func testInPlace(k *cluster) {
	t := k.t
	progress := startProgressServer(t)
	k.newJob("gang", 2, func(j *v1.TrainJob) { j.Spec.MaxRestarts = 2 })
	pods := k.servePods(k.attempt("gang", 1), progress)
	progress.set(workload.Summary{Outcome: workload.OutcomeRunning, Attempt: 1})
	k.waitStatus("gang", "running", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseRunning })

	why := "attempt 1 failed: rank 1 (worker 1, pid 42) exited with code 1"
	progress.set(workload.Summary{Outcome: workload.OutcomeRestarting, Attempt: 1, Reason: why})
	got := k.waitStatus("gang", "restarting in place", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRestarting && hasCond(st, v1.CondRestarting, metav1.ConditionTrue, operator.ReasonRestartingInPlace) &&
			hasCond(st, v1.CondRunning, metav1.ConditionFalse, operator.ReasonRestartingInPlace)
	})
	if c := cond(&got.Status, v1.CondRestarting); !strings.Contains(c.Message, why) {
		t.Errorf("restarting message %q lacks %q", c.Message, why)
	}
	k.event("gang", operator.ReasonRestartingInPlace)

	last := "attempt 2 restarted in place after rank 1 (worker 1, pid 42) exited with code 1"
	progress.set(workload.Summary{Outcome: workload.OutcomeRunning, Attempt: 2, Restarts: 1, InPlace: 1, LastRestart: last})
	got = k.waitStatus("gang", "running attempt 2 in place", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseRunning && st.Attempt == 2 && hasCond(st, v1.CondRestarting, metav1.ConditionFalse, "") &&
			hasCond(st, v1.CondRunning, metav1.ConditionTrue, "")
	})
	if st := got.Status; st.PodsAttempt != 1 || st.Restarts != 1 || st.Disruptions != 0 {
		t.Errorf("status after a restart in place: podsAttempt %d, restarts %d, disruptions %d", st.PodsAttempt, st.Restarts, st.Disruptions)
	}
	if note := k.event("gang", operator.ReasonRestartedInPlace); !strings.HasPrefix(note, last+" (1 of 2 restarts used") {
		t.Errorf("RestartedInPlace event: %q", note)
	}
	for _, p := range pods {
		var cur corev1.Pod
		if err := k.c.Get(context.Background(), client.ObjectKeyFromObject(p), &cur); err != nil || cur.DeletionTimestamp != nil {
			t.Errorf("pod %s of attempt 1: %v, deleting %v; want it kept", p.Name, err, cur.DeletionTimestamp)
		}
	}
	for _, n := range []int{2, 3} {
		if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: k.ns, Name: workload.AttemptName("gang", n)}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			t.Errorf("Service of attempt %d: %v; want none (the gang restarted in place)", n, err)
		}
	}

	// A worker that failed in a way its gang could not restart in place (its launcher
	// exited): the operator recreates the gang, as attempt 3.
	k.setPod(pods[1], exited(137, ""))
	next := k.attempt("gang", 3)
	k.gone("gang", 1)
	env3 := map[string]string{}
	for _, e := range next[0].Spec.Containers[0].Env {
		env3[e.Name] = e.Value
	}
	if env3[workload.EnvAttempt] != "3" || env3[workload.EnvRestarts] != "2" {
		t.Errorf("attempt 3's worker env: attempt %q, restarts %q; want 3 and 2", env3[workload.EnvAttempt], env3[workload.EnvRestarts])
	}
	if st := k.get("gang").Status; st.PodsAttempt != 0 || st.Attempt != 3 || st.Restarts != 2 {
		t.Errorf("status after recreating: %+v", st)
	}

	// The gang fails for good in place: the job fails, nothing is recreated.
	pods = k.servePods(next, progress)
	final := "rank 0 (worker 0, pid 7) exited with code 1 in attempt 4; no restarts left (maxRestarts 2)"
	k.setPod(pods[1], exited(1, string(workload.Summary{Worker: 1, Outcome: "failed", Reason: final, Final: "WorkerFailed",
		Attempt: 4, Restarts: 2}.Encode())))
	got = k.waitStatus("gang", "failed for good", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseFailed && hasCond(st, v1.CondFailed, metav1.ConditionTrue, "WorkerFailed")
	})
	if st := got.Status; st.Reason != final || st.Attempt != 4 || st.Restarts != 2 {
		t.Errorf("failed status: %+v", st)
	}
	k.eventually("worker 0's running pod stopped", func() (bool, string) {
		left := k.pods("gang", 3)
		return len(left) == 1, fmt.Sprintf("%d pods", len(left))
	})
	for _, n := range []int{4, 5} {
		if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: k.ns, Name: workload.AttemptName("gang", n)}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			t.Errorf("Service of attempt %d: %v; want none after the gang failed for good", n, err)
		}
	}
}
