package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
)

// The load: this many clients submit this many jobs each, at the same time.
const (
	loadClients       = 50
	loadJobsPerClient = 20
	loadJobs          = loadClients * loadJobsPerClient
)

// A server under load from 50 concurrent clients: while a blocker holds every CPU, 1,000
// submissions are all accepted, each once, and all wait with a reason; then every job is
// stopped, the blocker's supervisor included.
func TestServerLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 1,000-job load test")
	}
	began := time.Now()
	s := newJobServer(t, t.TempDir())
	c := loadClient(t, s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drainJobs(ctx, c); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	blocker := submitBlocker(ctx, t, c)
	submitted := time.Now()
	ids := submitConcurrently(ctx, t, c)
	t.Logf("%d submissions from %d clients in %s", loadJobs, loadClients, time.Since(submitted).Round(time.Millisecond))
	checkQueue(ctx, t, c, blocker, ids)

	stopped := time.Now()
	if err := drainJobs(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped %d jobs in %s", loadJobs+1, time.Since(stopped).Round(time.Millisecond))
	checkAllStopped(ctx, t, c, loadJobs+1)
	if d := time.Since(began); d > 60*time.Second {
		t.Errorf("the load test took %s, want well under 60s", d.Round(time.Second))
	}
}

// loadClient returns a client of the server with the server's token and a connection
// pool that serves every concurrent client, each request bounded in time.
func loadClient(t *testing.T, s *jobServer) *client.Client {
	t.Helper()
	token, err := client.ResolveToken(filepath.Join(s.dir, "config", "token"))
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = loadClients
	t.Cleanup(tr.CloseIdleConnections)
	return client.New(s.addr, token, client.WithHTTPClient(&http.Client{Transport: tr, Timeout: 30 * time.Second}))
}

// shellJob is a TrainJob of one worker with cpus cores that runs command.
func shellJob(cpus int, command ...string) *v1.TrainJob {
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: command,
		Resources: v1.WorkerResources{CPU: resource.NewQuantity(int64(cpus), resource.DecimalSI)}}}
	job.APIVersion, job.Kind = v1.APIVersion, v1.Kind
	return job
}

// submitBlocker submits a job that holds every CPU of the machine for 300 seconds, and
// waits until it runs, so that no other job can start.
func submitBlocker(ctx context.Context, t *testing.T, c *client.Client) string {
	t.Helper()
	j, err := c.Submit(ctx, client.SubmitRequest{Job: shellJob(runtime.NumCPU(), "sleep", "300")})
	if err != nil {
		t.Fatalf("submit the blocker: %v", err)
	}
	for ; j.Status != client.StatusRunning; time.Sleep(50 * time.Millisecond) {
		d, err := c.Get(ctx, j.ID)
		if err != nil {
			t.Fatalf("the blocker %s does not run: %v", j.ID, err)
		}
		if client.Ended(d.Job.Status) {
			t.Fatalf("the blocker %s ended: %s %s", j.ID, d.Job.Status, d.Job.Message)
		}
		j = d.Job
	}
	return j.ID
}

// submitConcurrently submits loadJobs jobs of `sh -c true` with 1 CPU each, from
// loadClients goroutines at once, and returns their IDs. Every submission must be
// accepted (201).
func submitConcurrently(ctx context.Context, t *testing.T, c *client.Client) []string {
	t.Helper()
	ids := make([]string, loadJobs)
	errs := make([]error, loadJobs)
	var wg sync.WaitGroup
	for g := range loadClients {
		wg.Go(func() {
			for i := g * loadJobsPerClient; i < (g+1)*loadJobsPerClient; i++ {
				j, err := c.Submit(ctx, client.SubmitRequest{Job: shellJob(1, "sh", "-c", "true")})
				ids[i], errs[i] = j.ID, err
			}
		})
	}
	wg.Wait()
	seen := make(map[string]int, loadJobs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("submission %d of %d was refused: %v", i, loadJobs, err)
		}
		if prev, dup := seen[ids[i]]; dup || ids[i] == "" {
			t.Fatalf("submissions %d and %d got the same ID %q", prev, i, ids[i])
		}
		seen[ids[i]] = i
	}
	return ids
}

// checkQueue waits until List shows the blocker RUNNING and every submitted job PENDING
// with a waiting reason, each once and nothing else; it fails the test if that does not
// happen within 20 seconds.
func checkQueue(ctx context.Context, t *testing.T, c *client.Client, blocker string, ids []string) {
	t.Helper()
	var problem error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		jobs, err := c.List(ctx)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if problem = queueProblem(jobs, blocker, ids); problem == nil {
			return
		}
	}
	t.Fatalf("after 20s: %v", problem)
}

// queueProblem says what is wrong with the list of jobs, or returns nil when it holds the
// blocker RUNNING and the submitted jobs PENDING with a waiting reason, each once.
func queueProblem(jobs []client.Job, blocker string, ids []string) error {
	want := make(map[string]bool, len(ids)+1)
	for _, id := range ids {
		want[id] = true
	}
	want[blocker] = true
	seen := make(map[string]bool, len(jobs))
	waiting := 0
	for _, j := range jobs {
		switch {
		case !want[j.ID]:
			return fmt.Errorf("list shows job %s, which no one submitted", j.ID)
		case seen[j.ID]:
			return fmt.Errorf("list shows job %s twice", j.ID)
		case j.ID == blocker && j.Status != client.StatusRunning:
			return fmt.Errorf("the blocker %s is %s (%s), want RUNNING", j.ID, j.Status, j.Message)
		case j.ID != blocker && j.Status != client.StatusPending:
			return fmt.Errorf("job %s is %s (%s), want PENDING behind the blocker", j.ID, j.Status, j.Message)
		case j.ID != blocker && j.Message != "":
			waiting++
		}
		seen[j.ID] = true
	}
	if len(jobs) != len(want) {
		return fmt.Errorf("list shows %d jobs, want %d", len(jobs), len(want))
	}
	if waiting != len(ids) {
		return fmt.Errorf("%d of %d pending jobs have a waiting reason", waiting, len(ids))
	}
	return nil
}

// drainJobs stops every pending job, then every running one, and waits until no job is
// pending or running. Pending jobs go first so that none starts when the blocker ends.
func drainJobs(ctx context.Context, c *client.Client) error {
	for ; ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		pending, err := c.List(ctx, client.StatusPending)
		if err != nil {
			return fmt.Errorf("list pending jobs: %w", err)
		}
		stopAll(ctx, c, pending)
		running, err := c.List(ctx, client.StatusRunning)
		if err != nil {
			return fmt.Errorf("list running jobs: %w", err)
		}
		if len(pending) == 0 && len(running) == 0 {
			return nil
		}
		stopAll(ctx, c, running)
	}
	return fmt.Errorf("jobs still pending or running: %w", ctx.Err())
}

// stopAll asks the server to stop the jobs, from 8 goroutines. A job that ended meanwhile
// is refused, which is fine: the caller lists the jobs again.
func stopAll(ctx context.Context, c *client.Client, jobs []client.Job) {
	const stoppers = 8
	var wg sync.WaitGroup
	for g := range stoppers {
		wg.Go(func() {
			for i := g; i < len(jobs); i += stoppers {
				if !jobs[i].StopRequested {
					_, _ = c.Stop(ctx, jobs[i].ID)
				}
			}
		})
	}
	wg.Wait()
}

// checkAllStopped checks that the server holds n jobs, all STOPPED.
func checkAllStopped(ctx context.Context, t *testing.T, c *client.Client, n int) {
	t.Helper()
	jobs, err := c.List(ctx)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	stopped := 0
	for _, j := range jobs {
		if j.Status == client.StatusStopped {
			stopped++
		}
	}
	if len(jobs) != n || stopped != n {
		t.Errorf("after stopping: %d jobs, %d of them STOPPED, want %d, all STOPPED", len(jobs), stopped, n)
	}
}
