package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
)

// writeRun writes a run folder as `trainyard run` leaves it: run.json, job.yaml, rank
// logs of one attempt and n results.
func writeRun(t *testing.T, storage, name string, phase v1.JobPhase, created time.Time, n int) {
	t.Helper()
	dir := filepath.Join(storage, name)
	rec := rundir.Record{Name: name, Phase: phase, Created: created, Updated: created,
		Attempts: []rundir.Attempt{{Number: 1, Started: created, Ranks: []rundir.Rank{
			{Rank: 0, Log: rundir.LogPath(1, 0)}, {Rank: 1, Worker: 1, Log: rundir.LogPath(1, 1)}}}}}
	if phase != v1.PhaseRunning {
		rec.Finished = &created
	}
	data, _ := json.Marshal(rec)
	write(t, filepath.Join(dir, rundir.RecordFile), string(data))
	write(t, filepath.Join(dir, rundir.SpecFile), "apiVersion: trainyard.dev/v1alpha1\nkind: TrainJob\nspec:\n  workers: 2\n  command: [python3, train.py]\n")
	write(t, filepath.Join(dir, rundir.LogPath(1, 0)), "rank 0 line 1\nrank 0 line 2\n")
	write(t, filepath.Join(dir, rundir.LogPath(1, 1)), "rank 1 line 1\n")
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		_ = json.NewEncoder(&b).Encode(reporting.Result{Iteration: i, Metrics: map[string]float64{"loss": 1 / float64(i)}})
	}
	write(t, filepath.Join(dir, reporting.ResultFile), b.String())
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The runs of a storage path are jobs: listed, paged, read, their logs and results;
// stopping one is refused.
func TestSource(t *testing.T) {
	storage := t.TempDir()
	t0 := time.Unix(1_800_000_000, 0)
	writeRun(t, storage, "mnist-a", v1.PhaseSucceeded, t0, 10)
	writeRun(t, storage, "mnist-b", v1.PhaseRunning, t0.Add(time.Minute), 3)
	write(t, filepath.Join(storage, "not-a-run", "notes.txt"), "x")
	s := &Source{Storage: storage, Poll: 10 * time.Millisecond}
	ctx := context.Background()

	page, err := s.ListPage(ctx, client.ListOptions{Sort: "newest", Limit: 1})
	if err != nil || page.Total != 2 || len(page.Jobs) != 1 || page.Jobs[0].ID != "mnist-b" || page.Jobs[0].Status != "RUNNING" {
		t.Fatalf("newest first, one per page: %+v, %v", page, err)
	}
	if page, _ := s.ListPage(ctx, client.ListOptions{Statuses: []client.JobStatus{"SUCCEEDED"}}); len(page.Jobs) != 1 || page.Jobs[0].ID != "mnist-a" {
		t.Errorf("succeeded runs: %+v", page.Jobs)
	}
	d, err := s.Get(ctx, "mnist-a")
	if err != nil || d.Job.Workers != 2 || d.Results == nil || d.Results.Iteration != 10 || d.Run == nil || len(d.Run.Attempts) != 1 {
		t.Fatalf("get: %+v, %v", d, err)
	}
	if d.Job.Restarts != 0 || d.Job.Preemptions != 0 {
		t.Errorf("mnist-a: %d restarts, %d preemptions", d.Job.Restarts, d.Job.Preemptions)
	}
	rec := rundir.Record{Name: "p", Phase: v1.PhaseInterrupted, Preemptions: 2, Attempts: []rundir.Attempt{
		{Number: 1, Outcome: "failed"}, {Number: 2, Outcome: "interrupted"}, {Number: 3, Outcome: "interrupted"}}}
	data, _ := json.Marshal(rec)
	write(t, filepath.Join(storage, "preempted", rundir.RecordFile), string(data))
	if d, err := s.Get(ctx, "preempted"); err != nil || d.Job.Restarts != 1 || d.Job.Preemptions != 2 {
		t.Errorf("a run restarted once and preempted twice: %+v, %v", d.Job, err)
	}
	// An interrupted run ends at its last record: its duration does not grow.
	rec.Created, rec.Updated = t0, t0.Add(6*time.Second)
	data, _ = json.Marshal(rec)
	write(t, filepath.Join(storage, "preempted", rundir.RecordFile), string(data))
	if d, _ := s.Get(ctx, "preempted"); d.Job.EndedAt == nil || d.Job.EndedAt.Sub(*d.Job.StartedAt) != 6*time.Second {
		t.Errorf("an interrupted run of 6 s ends at %v (started %v)", d.Job.EndedAt, d.Job.StartedAt)
	}
	for _, bad := range []string{"nope", "../etc", ""} {
		if _, err := s.Get(ctx, bad); !client.IsNotFound(err) {
			t.Errorf("get %q: %v, want not found", bad, err)
		}
	}
	one := 1
	if text, err := s.Logs(ctx, "mnist-a", client.LogOptions{Tail: 1}); err != nil || text != "rank 0 line 2\n" {
		t.Errorf("rank 0's last line: %q, %v", text, err)
	}
	if text, err := s.Logs(ctx, "mnist-a", client.LogOptions{Rank: &one}); err != nil || text != "rank 1 line 1\n" {
		t.Errorf("rank 1's log: %q, %v", text, err)
	}
	var whole bytes.Buffer
	if err := s.WriteLog(ctx, "mnist-a", client.LogOptions{}, &whole); err != nil || whole.String() != "rank 0 line 1\nrank 0 line 2\n" {
		t.Errorf("rank 0's whole log: %q, %v", whole.String(), err)
	}
	res, err := s.Results(ctx, "mnist-a", client.ResultOptions{After: 8})
	if err != nil || res.Total != 2 || len(res.Results) != 2 {
		t.Errorf("results after 8: %+v, %v", res, err)
	}
	if _, err := s.Stop(ctx, "mnist-b"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("stop: %v", err)
	}
	if err := s.Delete(ctx, "mnist-a"); err == nil || !strings.Contains(err.Error(), "removing its folder") {
		t.Errorf("delete: %v", err)
	}

	// Follow writes what a running run's log gains, and returns once the run has finished.
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- s.Follow(ctx, "mnist-b", &syncWriter{b: &out}, client.LogOptions{}) }()
	time.Sleep(50 * time.Millisecond)
	f, err := os.OpenFile(filepath.Join(storage, "mnist-b", rundir.LogPath(1, 0)), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("rank 0 line 3\n")
	f.Close()
	writeRun(t, storage, "mnist-b-done", v1.PhaseSucceeded, t0, 0) // unrelated
	finished := t0
	rec, _ = rundir.ReadRecord(filepath.Join(storage, "mnist-b"))
	rec.Phase, rec.Finished = v1.PhaseSucceeded, &finished
	data, _ = json.Marshal(rec)
	time.Sleep(50 * time.Millisecond)
	write(t, filepath.Join(storage, "mnist-b", rundir.RecordFile), string(data))
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "rank 0 line 3") {
			t.Errorf("follow: %v, wrote %q", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after the run finished")
	}
}

// syncWriter is a bytes.Buffer safe for Follow's goroutine and the test.
type syncWriter struct{ b *bytes.Buffer }

func (w *syncWriter) Write(p []byte) (int, error) { return w.b.Write(p) }

// Without a rank, a run's log is its console log, every rank's lines with their prefixes
// as trainyard run printed them (it was rank 0's log alone); a rank's log stays its own.
func TestConsoleLog(t *testing.T) {
	storage := t.TempDir()
	writeRun(t, storage, "two", v1.PhaseSucceeded, time.Unix(1_800_000_000, 0), 1)
	console := "[rank 0 pid 10] rank 0 line 1\n[rank 1 pid 11] rank 1 line 1\n"
	write(t, filepath.Join(storage, "two", rundir.ConsoleLog), console)
	s := &Source{Storage: storage}
	ctx := context.Background()
	if text, err := s.Logs(ctx, "two", client.LogOptions{}); err != nil || text != console {
		t.Errorf("the console log: %q, %v; want %q", text, err, console)
	}
	var whole bytes.Buffer
	if err := s.WriteLog(ctx, "two", client.LogOptions{}, &whole); err != nil || whole.String() != console {
		t.Errorf("the whole console log: %q, %v", whole.String(), err)
	}
	one := 1
	if text, err := s.Logs(ctx, "two", client.LogOptions{Rank: &one}); err != nil || text != "rank 1 line 1\n" {
		t.Errorf("rank 1's log: %q, %v", text, err)
	}
}

// A run whose launcher was killed recorded nothing after its start: it ends, for its
// duration, when it last printed or reported, not at its last record (nor now).
func TestKilledLauncherEndsAtItsLastOutput(t *testing.T) {
	storage := t.TempDir()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	rec := rundir.Record{Name: "killed", Phase: v1.PhaseInterrupted, Created: t0, Updated: t0.Add(time.Second),
		Reason: "its launcher (pid 1) is gone without recording how the run ended", Attempts: []rundir.Attempt{
			{Number: 1, Started: t0, Ranks: []rundir.Rank{{Rank: 0, Log: rundir.LogPath(1, 0)}}}}}
	data, _ := json.Marshal(rec)
	write(t, filepath.Join(storage, "killed", rundir.RecordFile), string(data))
	log := filepath.Join(storage, "killed", rundir.ConsoleLog)
	write(t, log, "[rank 0 pid 10] step 6\n")
	last := t0.Add(6 * time.Second)
	if err := os.Chtimes(log, last, last); err != nil {
		t.Fatal(err)
	}
	d, err := (&Source{Storage: storage}).Get(context.Background(), "killed")
	if err != nil || d.Job.EndedAt == nil || !d.Job.EndedAt.Equal(last) {
		t.Errorf("ends at %v (%v), want %v: its console log's last write", d.Job.EndedAt, err, last)
	}
}
