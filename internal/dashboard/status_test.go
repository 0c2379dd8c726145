package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
)

// jobsBackend serves fixed jobs by ID.
type jobsBackend struct {
	Backend
	jobs map[string]client.JobDetail
}

func (b jobsBackend) Get(_ context.Context, ref string) (client.JobDetail, error) {
	d, ok := b.jobs[ref]
	if !ok {
		return d, &client.APIError{Status: http.StatusNotFound, Message: "no job " + ref}
	}
	return d, nil
}

func (jobsBackend) Logs(context.Context, string, client.LogOptions) (string, error) { return "", nil }

// get answers GET path from h, signed in.
func get(t *testing.T, h *Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8265"+path, nil)
	r.AddCookie(&http.Cookie{Name: CookiePrefix, Value: h.sessions.issue()})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A job's page asks for /jobs/{id}/status.json while the job runs: its status as the page
// writes it, whether it ended, why, and how long it ran (to its end once it ended).
func TestStatusJSON(t *testing.T) {
	start := time.Now().Add(-time.Hour)
	end := start.Add(6 * time.Second)
	h, err := New(Config{Backend: jobsBackend{jobs: map[string]client.JobDetail{
		"run":  {Job: client.Job{ID: "run", Status: client.StatusRunning, StartedAt: &start}},
		"stop": {Job: client.Job{ID: "stop", Status: client.StatusStopped, StartedAt: &start, EndedAt: &end, Message: "stopped by a user"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		code int
		want jobStatus
	}{
		"run":  {200, jobStatus{Status: "running", Duration: "1h0m0s"}},
		"stop": {200, jobStatus{Status: "stopped", Ended: true, Message: "stopped by a user", Duration: "6s"}},
		"nope": {404, jobStatus{}},
	}
	for id, tc := range cases {
		w := get(t, h, "/jobs/"+id+"/status.json")
		if w.Code != tc.code {
			t.Errorf("%s: %d, want %d", id, w.Code, tc.code)
			continue
		}
		if tc.code != 200 {
			continue
		}
		if got := w.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q", id, got)
		}
		var got jobStatus
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v: %s", id, err, w.Body)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", id, diff)
		}
	}
}

// A job's page says how far the job is and the time left (it was in the list only), says
// how many checkpoints it has without listing 90 names in its fields, puts the
// checkpoint table in a box of bounded height, and tells its script whether it ended.
func TestJobPage(t *testing.T) {
	start := time.Now().Add(-time.Minute)
	names := make([]string, 90)
	for i := range names {
		names[i] = "checkpoint_" + strings.Repeat("0", 5) + string(rune('0'+i%10))
	}
	names[89] = "checkpoint_000090"
	h, err := New(Config{Backend: jobsBackend{jobs: map[string]client.JobDetail{
		"run": {Job: client.Job{ID: "run", Status: client.StatusRunning, StartedAt: &start,
			Gang: &client.Gang{Workers: 2, GPUsPerWorker: 1, MilliCPUPerWorker: 1000, Granted: true, GPUs: [][]int{{2}, {3}}}},
			Checkpoints: names,
			Results:     &client.Result{Iteration: 25, TimeTotalS: 50, Metrics: client.Metrics{TotalMetric: 100}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	w := get(t, h, "/jobs/run")
	body := w.Body.String()
	for _, want := range []string{
		`<dd id="progress" >`, `<progress max="100" value="25">25%</progress> 25%, 2m30s left`,
		`<dd id="checkpoint-count">90, the latest <code>checkpoint_000090</code></dd>`,
		`data-ended="false"`, `id="log-times"`,
		`<dt>Gang</dt><dd>2 workers × (1 GPU, 1 CPU), running on GPUs 2,3</dd>`, // a Ray driver's
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the job's page has no %s:\n%s", want, body)
		}
	}
	if n := strings.Count(body, "checkpoint_00000"); n != 0 {
		t.Errorf("the job's fields name %d checkpoints one by one", n)
	}
}

// The compare page shows the settings that differ as text, HTML-escaped once by the
// template: not JSON-escaped (\u003c), and never as markup.
func TestCompareShowsSpecsUnescaped(t *testing.T) {
	spec := func(arg string) *v1.TrainJob {
		return &v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"python3", "-c", arg}}}
	}
	h, err := New(Config{Backend: jobsBackend{jobs: map[string]client.JobDetail{
		"a": {Job: client.Job{ID: "a", Status: client.StatusSucceeded}, Spec: spec("print(1 < 2)")},
		"b": {Job: client.Job{ID: "b", Status: client.StatusSucceeded}, Spec: spec("print('<b>x</b>')")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	w := get(t, h, "/compare?id=a&id=b")
	body := w.Body.String()
	row := regexp.MustCompile(`<tr><td><code>command\[2\]</code></td>.*</tr>`).FindString(body)
	want := `<td><code>print(1 &lt; 2)</code></td><td><code>print(&#39;&lt;b&gt;x&lt;/b&gt;&#39;)</code></td>`
	if w.Code != 200 || !strings.Contains(row, want) {
		t.Errorf("the command's row is %q, want it to hold %s", row, want)
	}
	if strings.Contains(body, `\u003c`) || strings.Contains(body, "<b>x") {
		t.Errorf("the compare page shows escaped JSON or markup:\n%s", body)
	}
}
