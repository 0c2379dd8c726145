package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Get, Stop and Delete take a job's name as well as its ID, against the real server; a
// name is another job's only once its job is deleted.
func TestJobsByName(t *testing.T) {
	c := New(newRealServer(t).URL, testToken)
	ctx := context.Background()
	job, err := c.Submit(ctx, SubmitRequest{Job: trainJob("mnist", 0)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(ctx, SubmitRequest{Job: trainJob("mnist", 0)})
	wantRefusal(t, "a second job named mnist", err, http.StatusConflict, "a job named 'mnist' exists already ("+job.ID+")")
	if d, err := c.Get(ctx, "mnist"); err != nil || d.Job.ID != job.ID {
		t.Errorf("Get(mnist) = job %q, %v; want %s", d.Job.ID, err, job.ID)
	}
	if j, err := c.Stop(ctx, "mnist"); err != nil || j.ID != job.ID || j.Status != StatusStopped {
		t.Errorf("Stop(mnist) = %+v, %v; want %s STOPPED", j, err, job.ID)
	}
	if err := c.Delete(ctx, "mnist"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(ctx, "mnist")
	wantRefusal(t, "get a deleted name", err, http.StatusNotFound, "no job with id or name 'mnist' (trainyard list shows the jobs)")
	if _, err := c.Submit(ctx, SubmitRequest{Job: trainJob("mnist", 0)}); err != nil {
		t.Errorf("the name of a deleted job: %v", err)
	}
}

// The server's list says what each job asks for: its workers and each one's resources,
// with the CPU share the server gave a job that named none.
func TestListSaysWhatJobsHold(t *testing.T) {
	c := New(newRealServer(t).URL, testToken)
	ctx := context.Background()
	if _, err := c.Submit(ctx, SubmitRequest{Job: trainJob("two-gpus", 2)}); err != nil {
		t.Fatal(err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	j := list[0]
	// The real server's machine has 2 GPUs and 4 cores: 2 cores per GPU.
	if j.Workers != 1 || j.Resources == nil || j.Resources.GPU != 2 || j.Resources.CPU == nil || j.Resources.CPU.String() != "4" {
		t.Errorf("listed job: %d workers, resources %+v; want 1 worker with 2 GPUs and 4 CPUs", j.Workers, j.Resources)
	}
}

// statusServer is a fake server of one job, job-1 (name mnist), whose GET answers the
// next of jobs at each call, then the last one.
type statusServer struct {
	mu    sync.Mutex
	jobs  []Job
	calls int
	asked []string // the {id} of each GET
}

func (s *statusServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, r.PathValue("id"))
	j := s.jobs[min(s.calls, len(s.jobs)-1)]
	s.calls++
	_ = json.NewEncoder(w).Encode(JobDetail{Job: j})
}

func TestWaitStarted(t *testing.T) {
	pending := func(msg string) Job { return Job{ID: "job-1", Status: StatusPending, Message: msg} }
	cases := map[string]struct {
		jobs     []Job
		want     JobStatus
		reasons  []string
		requests int
	}{
		"running at once": {jobs: []Job{{ID: "job-1", Status: StatusRunning}}, want: StatusRunning, requests: 1},
		"each new reason, once": {
			jobs: []Job{pending(""), pending("needs 2 GPUs, 1 free"), pending("needs 2 GPUs, 1 free"),
				pending("waiting behind job llama (priority 5, submitted earlier)"), {ID: "job-1", Status: StatusRunning}},
			want:     StatusRunning,
			reasons:  []string{"needs 2 GPUs, 1 free", "waiting behind job llama (priority 5, submitted earlier)"},
			requests: 5,
		},
		"stopped while it waited": {
			jobs: []Job{pending("needs 1 CPU, 0 free"), {ID: "job-1", Status: StatusStopped}}, want: StatusStopped,
			reasons: []string{"needs 1 CPU, 0 free"}, requests: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &statusServer{jobs: tc.jobs}
			mux := http.NewServeMux()
			mux.Handle("GET /api/v1/jobs/{id}", s)
			web := httptest.NewServer(proving(mux))
			defer web.Close()
			c := New(web.URL, testToken, WithPollInterval(time.Millisecond))
			var reasons []string
			j, err := c.WaitStarted(context.Background(), "mnist", func(j Job) { reasons = append(reasons, j.Message) })
			if err != nil || j.Status != tc.want {
				t.Fatalf("WaitStarted = %+v, %v; want %s", j, err, tc.want)
			}
			if diff := cmp.Diff(tc.reasons, reasons); diff != "" {
				t.Errorf("reasons told (-want +got):\n%s", diff)
			}
			// The name is looked up once; the job's ID after that.
			want := []string{"mnist"}
			for range tc.requests - 1 {
				want = append(want, "job-1")
			}
			if diff := cmp.Diff(want, s.asked); diff != "" {
				t.Errorf("jobs asked for (-want +got):\n%s", diff)
			}
		})
	}
}
