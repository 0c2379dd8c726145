package envtest_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/internal/cli"
	"github.com/trainyard/trainyard/internal/testkube"
	"github.com/trainyard/trainyard/internal/workload"
)

// `trainyard operator` as the Deployment runs it, against a real API server, with only
// the permissions `trainyard install` gives its ServiceAccount: it becomes ready, takes
// the leader Lease, runs a TrainJob's first attempt as a batch Job without being refused
// anything, and stops cleanly on its context's end (SIGTERM).
func TestOperatorCommand(t *testing.T) {
	env := testkube.Start(t, testkube.Options{NoCRD: true})
	if code, _, _ := installCLI(t, "install", "--kubeconfig", env.Kubeconfig); code != 0 {
		t.Fatalf("install: exit %d", code)
	}
	asOperator := impersonating(t, env.Kubeconfig, "system:serviceaccount:trainyard-system:trainyard-operator")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probeAddr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Main(ctx, []string{"operator", "--kubeconfig", asOperator, "--image", "registry.local/trainyard:test",
			"--metrics-bind-address", "0", "--health-probe-bind-address", probeAddr,
			"--leader-elect", "--leader-election-namespace", "trainyard-system"},
			cli.IO{In: strings.NewReader(""), Out: &syncBuffer{}, Err: &stderr})
	}()

	ready := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !ready; time.Sleep(100 * time.Millisecond) {
		select {
		case code := <-exited:
			t.Fatalf("trainyard operator exited %d before it was ready:\n%s", code, stderr.String())
		default:
		}
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
	}
	if !ready {
		t.Fatalf("trainyard operator not ready on %s after 30s", probeAddr)
	}

	var lease coordinationv1.Lease
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: "trainyard-system", Name: "trainyard-operator.trainyard.dev"}, &lease)
		if err == nil && lease.Spec.HolderIdentity != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader Lease after 30s: %v", err)
		}
	}

	job := validJob("default", "rbac")
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var jobs batchv1.JobList
		if err := env.Client.List(ctx, &jobs, client.InNamespace("default"), client.MatchingLabels{workload.LabelJob: "rbac"}); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator made no batch Job for a TrainJob in 30s; its log:\n%s", stderr.String())
		}
	}
	if log := stderr.String(); strings.Contains(log, "forbidden") {
		t.Errorf("the operator was refused something with the installed ClusterRole:\n%s", log)
	}

	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("trainyard operator stopped with exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("trainyard operator did not stop within 30s of its context's end")
	}
	t.Logf("the operator's log:\n%s", stderr.String())
}

// syncBuffer is a buffer that goroutines can write while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
