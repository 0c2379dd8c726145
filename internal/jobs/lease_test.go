package jobs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/ganglease"
	"github.com/trainyard/trainyard/internal/store"
)

// leaseEnv is an env whose Service serves gang leases on a Unix socket, on a machine with
// two cores and four GPUs (0-3) that a stand-in nvidia-smi reports to the jobs' supervisors.
type leaseEnv struct {
	*env
	key    []byte
	socket string
}

func newLeaseEnv(t *testing.T) *leaseEnv {
	t.Helper()
	bin := t.TempDir()
	smi := "#!/bin/sh\nfor i in 0 1 2 3; do echo \"$i, GPU-0000000$i-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 81559, 1, 0, 570.86.15\"; done\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	sockets, err := os.MkdirTemp("", "lease") // short: a socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockets) })
	le := &leaseEnv{key: []byte("test lease key"), socket: filepath.Join(sockets, "lease.sock")}
	le.env = &env{t: t, dir: t.TempDir(), setup: func(s *Service) {
		s.cfg.Node.GPUs, s.cfg.Node.MilliCPU = []int{0, 1, 2, 3}, 2000
		s.cfg.LeaseKey, s.cfg.LeaseSocket = le.key, le.socket
	}}
	le.open()
	t.Cleanup(le.close)
	le.until("the lease socket exists", func() bool { _, err := os.Stat(le.socket); return err == nil })
	return le
}

// running submits a job on gpus GPUs that sleeps until stopped, waits until it runs, and
// stops it when the test ends.
func (e *leaseEnv) running(gpus int32) *store.Job {
	e.t.Helper()
	return e.runningWith(gpus, "500m")
}

// runningWith is running with the job's CPU.
func (e *leaseEnv) runningWith(gpus int32, cpu string) *store.Job {
	e.t.Helper()
	job := e.job("exec sleep 300", cpu)
	job.Spec.Resources.GPU = gpus
	j, err := e.svc.Submit(Submission{Job: job})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if _, err := e.svc.Stop(j.ID); err == nil {
			e.waitFor(j.ID, store.Stopped, store.Failed, store.Succeeded)
		}
	})
	return e.waitFor(j.ID, store.Running)
}

// request asks for a gang of the job's with the job's secret.
func (e *leaseEnv) request(j *store.Job, workers, gpusPerWorker int) ganglease.Request {
	return ganglease.Request{Job: j.ID, Secret: ganglease.Secret(e.key, j.ID), Workers: workers, GPUsPerWorker: gpusPerWorker}
}

// acquire leases GPUs with the real client, giving up after a generous minute.
func (e *leaseEnv) acquire(req ganglease.Request, waiting func(string)) (*ganglease.Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return ganglease.Acquire(ctx, e.socket, req, waiting)
}

// until waits (generously) until cond holds.
func (e *env) until(what string, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within 10s", what)
		}
	}
}

func (e *env) get(id string) *store.Job {
	e.t.Helper()
	j, err := e.store.Get(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// A running job's gang that fits gets GPUs of its own, apart from the job's, and the
// job's record holds them; released, they are freed for a job that waits for them.
func TestLeaseGrantsAGangAndFreesItOnRelease(t *testing.T) {
	e := newLeaseEnv(t)
	a := e.running(1)
	lease, err := e.acquire(e.request(a, 3, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	var granted []int
	for _, w := range lease.GPUs {
		granted = append(granted, w...)
	}
	if len(lease.GPUs) != 3 || len(granted) != 3 || slices.Contains(granted, a.GPUs[0][0]) ||
		len(slices.Compact(slices.Sorted(slices.Values(granted)))) != 3 {
		t.Fatalf("the gang of 3 workers × 1 GPU got %v; the job holds %v", lease.GPUs, a.GPUs)
	}
	if g := e.get(a.ID).Gang; g == nil || g.Workers != 3 || g.GPUsPerWorker != 1 || !cmp.Equal(g.GPUs, lease.GPUs) {
		t.Fatalf("the job's gang record %+v, want 3 × 1 holding %v", g, lease.GPUs)
	}
	job := e.job("exec sleep 300", "500m")
	job.Spec.Resources.GPU = 1
	b, err := e.svc.Submit(Submission{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.svc.Stop(b.ID); e.waitFor(b.ID, store.Stopped, store.Failed, store.Succeeded) })
	e.until("the second job waits for a GPU", func() bool { return e.get(b.ID).Message == "needs 1 GPU, 0 free" })
	lease.Release()
	e.until("the gang's record is gone", func() bool { return e.get(a.ID).Gang == nil })
	started := e.waitFor(b.ID, store.Running)
	if !slices.Contains(granted, started.GPUs[0][0]) {
		t.Errorf("the second job runs on %v, not on a GPU the gang gave back (%v)", started.GPUs, granted)
	}
}

// A gang that does not fit now waits: its client and the job's message say why; when
// GPUs are freed, it gets them.
func TestLeaseWaitsUntilItsGangFits(t *testing.T) {
	e := newLeaseEnv(t)
	a, b := e.running(1), e.running(2)
	reasons := make(chan string, 64)
	type result struct {
		lease *ganglease.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		lease, err := e.acquire(e.request(a, 2, 1), func(why string) {
			select {
			case reasons <- why:
			default:
			}
		})
		done <- result{lease, err}
	}()
	var why string
	select {
	case why = <-reasons:
	case r := <-done:
		t.Fatalf("Acquire returned %v, %v before it waited", r.lease, r.err)
	case <-time.After(60 * time.Second):
		t.Fatal("no waiting reason within 60s")
	}
	if !strings.Contains(why, "needs 2 GPUs") {
		t.Errorf("the gang waits because %q, want it to say it needs 2 GPUs", why)
	}
	want := "its gang (2 workers × (1 GPU)) waits: " + why
	e.until("the job's message says why its gang waits", func() bool { return e.get(a.ID).Message == want })
	if g := e.get(a.ID).Gang; g == nil || g.GPUs != nil {
		t.Fatalf("the job's gang record %+v while it waits, want one without GPUs", g)
	}
	if _, err := e.svc.Stop(b.ID); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the gang got no GPUs within 60s of their release")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.lease.Release()
	if len(r.lease.GPUs) != 2 || slices.Contains(slices.Concat(r.lease.GPUs...), a.GPUs[0][0]) {
		t.Errorf("the gang got %v; the job holds %v", r.lease.GPUs, a.GPUs)
	}
	if j := e.get(a.ID); j.Gang == nil || !cmp.Equal(j.Gang.GPUs, r.lease.GPUs) || j.Message != "" {
		t.Errorf("the job's gang record %+v, message %q; want the GPUs granted and no message", j.Gang, j.Message)
	}
}

// The server refuses a lease with another job's or key's secret, for a job that does not
// run, for a gang larger than the machine, and while the job holds another lease; a
// refusal leaves the lease the job holds alone.
func TestLeaseRefusals(t *testing.T) {
	e := newLeaseEnv(t)
	a := e.running(1)
	finished, err := e.svc.Submit(Submission{Job: e.job("true", "500m")})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor(finished.ID, store.Succeeded)
	wrongKey := e.request(a, 1, 1)
	wrongKey.Secret = ganglease.Secret([]byte("another key"), a.ID)
	otherJobs := e.request(a, 1, 1)
	otherJobs.Secret = ganglease.Secret(e.key, finished.ID)
	unknown := e.request(a, 1, 1)
	unknown.Job, unknown.Secret = "raysubmit_none", ganglease.Secret(e.key, "raysubmit_none")
	cases := []struct {
		name string
		req  ganglease.Request
		want string
	}{
		{"another key's secret", wrongKey, "the secret does not match the job"},
		{"another job's secret", otherJobs, "the secret does not match the job"},
		{"a finished job", e.request(finished, 1, 1), "is SUCCEEDED; only a running job leases a gang"},
		{"a job that does not exist", unknown, "job raysubmit_none does not exist"},
		{"a gang larger than the machine", e.request(a, 5, 1), "the gang (5 workers × (1 GPU)) can never run on this server: the job needs 5 GPUs"},
		{"a second lease while one is held", e.request(a, 1, 1), "already holds or awaits a gang; a job leases one gang at a time"},
	}
	held, err := e.acquire(e.request(a, 2, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.acquire(tc.req, nil)
			var refused *ganglease.RefusedError
			if !errors.As(err, &refused) || !strings.Contains(refused.Reason, tc.want) {
				t.Errorf("Acquire: %v, want a *ganglease.RefusedError containing %q", err, tc.want)
			}
		})
	}
	if g := e.get(a.ID).Gang; g == nil || !cmp.Equal(g.GPUs, held.GPUs) {
		t.Errorf("after the refusals the job's gang record is %+v, want the lease it holds (%v)", g, held.GPUs)
	}
}

// A request that is not a lease request is answered 400 (405 for a GET) at once; a
// refused one gets the status that says why (403 for the secret, 422 for the size).
func TestLeaseBadRequests(t *testing.T) {
	e := newLeaseEnv(t)
	cases := map[string]struct {
		method, body string
		status       int
		want         string
	}{
		"not JSON":       {method: "POST", body: `{"job":`, status: http.StatusBadRequest, want: "decode the lease request"},
		"a JSON array":   {method: "POST", body: `[1]`, status: http.StatusBadRequest, want: "decode the lease request"},
		"no workers":     {method: "POST", body: `{"job":"j","secret":"s","gpusPerWorker":1}`, status: http.StatusBadRequest, want: "workers is 0"},
		"negative CPU":   {method: "POST", body: `{"job":"j","secret":"s","workers":1,"milliCPUPerWorker":-5}`, status: http.StatusBadRequest, want: "none may be negative"},
		"a wrong secret": {method: "POST", body: `{"job":"j","secret":"s","workers":1,"gpusPerWorker":1}`, status: http.StatusForbidden, want: "secret does not match"},
		"too large a gang": {method: "POST", status: http.StatusUnprocessableEntity, want: "the gang (5 workers × (1 GPU)) can never run on this server",
			body: fmt.Sprintf(`{"job":"j","secret":%q,"workers":5,"gpusPerWorker":1}`, ganglease.Secret(e.key, "j"))},
		"a GET": {method: "GET", status: http.StatusMethodNotAllowed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, body := rawRequest(t, e.socket, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: trainyard\r\nContent-Type: application/json\r\n"+
				"Content-Length: %d\r\nConnection: close\r\n\r\n%s", tc.method, ganglease.Path, len(tc.body), tc.body))
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("status %d, body %q; want %d and %q", status, body, tc.status, tc.want)
			}
		})
	}
}

// rawRequest sends an HTTP request as written on the socket and returns the status and
// body of the answer.
func rawRequest(t *testing.T, socket, request string) (int, string) {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
	return resp.StatusCode, body.String()
}

// Only the server's user may connect to the lease socket.
func TestLeaseSocketIsPrivate(t *testing.T) {
	e := newLeaseEnv(t)
	fi, err := os.Stat(e.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("the lease socket's mode is %v, want a socket with 0600", fi.Mode())
	}
}

// A gang's CPU is counted: the job's own CPU is lent to it (its process waits on the
// gang), a gang that needs more cores than free waits and says so, one larger than the
// machine is refused, and while it runs its cores are taken from the jobs that wait.
func TestLeaseCountsTheGangsCPU(t *testing.T) {
	e := newLeaseEnv(t)
	driver, other := e.runningWith(0, "500m"), e.runningWith(0, "1")
	req := e.request(driver, 2, 0)
	req.MilliCPUPerWorker = 1500
	if _, err := e.acquire(req, nil); err == nil || !strings.Contains(err.Error(),
		"the gang (2 workers × (1.5 CPU)) can never run on this server: the job needs 3 CPU") {
		t.Errorf("a gang of 3 cores on 2: %v, want it refused as one that can never run", err)
	}
	req.MilliCPUPerWorker = 750 // 1.5 cores: the driver's 0.5 is lent, the other job's 1 is not
	reasons := make(chan string, 64)
	got := make(chan *ganglease.Lease, 1)
	go func() {
		lease, err := e.acquire(req, func(why string) {
			select {
			case reasons <- why:
			default:
			}
		})
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	select {
	case why := <-reasons:
		if want := "needs 1.5 CPUs, 1 free"; !strings.Contains(why, want) {
			t.Errorf("the gang waits because %q, want %q", why, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no waiting reason within 60s")
	}
	e.until("the job's message says why its gang waits", func() bool {
		return strings.HasPrefix(e.get(driver.ID).Message, "its gang (2 workers × (0.75 CPU)) waits: needs 1.5 CPUs, 1 free")
	})
	if _, err := e.svc.Stop(other.ID); err != nil {
		t.Fatal(err)
	}
	var lease *ganglease.Lease
	select {
	case lease = <-got:
	case <-time.After(60 * time.Second):
		t.Fatal("the gang got no cores within 60s of the other job's stop")
	}
	if lease == nil {
		t.Fatal("no lease")
	}
	defer lease.Release()
	if len(lease.GPUs) != 2 || len(lease.GPUs[0])+len(lease.GPUs[1]) != 0 {
		t.Errorf("a gang on CPUs got GPUs %v, want 2 empty lists", lease.GPUs)
	}
	if g := e.get(driver.ID).Gang; g == nil || g.GPUs == nil || g.MilliCPUPerWorker != 750 {
		t.Errorf("the job's gang record %+v, want 2 × 750m, granted", g)
	}
	job := e.job("exec sleep 300", "600m")
	waiting, err := e.svc.Submit(Submission{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.svc.Stop(waiting.ID); e.waitFor(waiting.ID, store.Stopped, store.Failed, store.Succeeded) })
	e.until("a job waits for the gang's cores", func() bool { return e.get(waiting.ID).Message == "needs 0.6 CPUs, 0.5 free" })
	lease.Release()
	e.waitFor(waiting.ID, store.Running)
}

// A job lends its gang its own CPU only up to what the gang asks for: a gang of no CPU (a
// request its process may craft) frees none of the job's, and one of less frees the rest
// of it only. On 2 cores, a 1-core driver whose gang asks for no CPU still holds its core.
func TestAGangFreesNoMoreCPUThanItTakes(t *testing.T) {
	e := newLeaseEnv(t)
	driver := e.runningWith(0, "1")
	lease, err := e.acquire(e.request(driver, 1, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	job := e.job("exec sleep 300", "1500m")
	waiting, err := e.svc.Submit(Submission{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.svc.Stop(waiting.ID); e.waitFor(waiting.ID, store.Stopped, store.Failed, store.Succeeded) })
	e.until("a 1.5-core job waits beside a 1-core driver with a gang of no CPU", func() bool {
		return e.get(waiting.ID).Message == "needs 1.5 CPUs, 1 free"
	})
	if got := e.get(waiting.ID).Status; got != store.Pending {
		t.Fatalf("the 1.5-core job is %s, want it Pending", got)
	}
}
