package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
)

// makeRun writes a run folder under storage: its run.json, created ago before now, and
// its result.json of the given lines.
func makeRun(t *testing.T, storage, name string, phase v1.JobPhase, ago time.Duration, results ...string) string {
	t.Helper()
	return writeRun(t, storage, rundir.Record{Name: name, Phase: phase, Created: now.Add(-ago), Updated: now.Add(-ago / 2)}, results...)
}

// writeRun writes a run folder under storage with the record rec and result.json of the
// given lines.
func writeRun(t *testing.T, storage string, rec rundir.Record, results ...string) string {
	t.Helper()
	dir := filepath.Join(storage, rec.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rundir.RecordFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if len(results) > 0 {
		if err := os.WriteFile(filepath.Join(dir, reporting.ResultFile), []byte(strings.Join(results, "")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// resultLine is a line of result.json.
func resultLine(iteration int, metrics string) string {
	return fmt.Sprintf(`{"training_iteration": %d, "timestamp": "2025-03-01T11:00:00Z", "time_this_iter_s": 1.5, "time_total_s": %d, "attempt": 1%s}`+"\n",
		iteration, 2*iteration, metrics)
}

// testStorage is a storage path with runs of every kind, and things that are no runs.
func testStorage(t *testing.T) string {
	t.Helper()
	storage := t.TempDir()
	// failed after 10 minutes, restarted, succeeded 20 minutes later: 30m in all
	start, failed, ended := now.Add(-3*time.Hour), now.Add(-170*time.Minute), now.Add(-150*time.Minute)
	writeRun(t, storage, rundir.Record{Name: "fashion-mnist", Phase: v1.PhaseSucceeded, Created: start, Updated: ended, Finished: &ended,
		Attempts: []rundir.Attempt{{Number: 1, Started: start, Ended: &failed, Outcome: "failed"}, {Number: 2, Started: failed, Ended: &ended, Outcome: "succeeded"}}},
		resultLine(1, `, "loss": 0.9, "accuracy": 0.61`), resultLine(2, `, "loss": 0.41234567, "accuracy": 0.8765, "checkpoint": "checkpoint_000002"`))
	makeRun(t, storage, "train-20250301-113000-3fa9", v1.PhaseRunning, 30*time.Minute)
	makeRun(t, storage, "diverged", v1.PhaseFailed, 2*time.Hour, resultLine(7, `, "loss": "NaN"`))
	makeRun(t, storage, "crashed", v1.PhaseInterrupted, time.Hour, resultLine(3, `, "loss": 0.5`), `{"training_iteration": 4, "loss`)
	makeRun(t, storage, "no-metrics", v1.PhaseSucceeded, 50*time.Minute, resultLine(1, ""))
	if err := os.Mkdir(filepath.Join(storage, "not-a-run"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(storage, "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(storage, "fashion-mnist"), filepath.Join(storage, "link")); err != nil {
		t.Fatal(err)
	}
	return storage
}

// results without RUN lists the runs in the storage path, oldest first; folders without
// run.json, files and links are no runs.
func TestResultsListsRuns(t *testing.T) {
	runs, err := readRuns(testStorage(t))
	if err != nil {
		t.Fatal(err)
	}
	v, out := testView(false)
	if err := printRuns(v, "/runs", runs); err != nil {
		t.Fatal(err)
	}
	golden(t, "results-list", out.String())
}

func TestResultsListJSON(t *testing.T) {
	storage := testStorage(t)
	code, out, errOut := trainyard("results", "--storage-path", storage, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var names []string
	for _, r := range got {
		names = append(names, r["name"].(string))
	}
	if want := "fashion-mnist diverged crashed no-metrics train-20250301-113000-3fa9"; strings.Join(names, " ") != want {
		t.Errorf("runs %q, want %q", names, want)
	}
	first := got[0]
	last, _ := first["lastResult"].(map[string]any)
	metrics, _ := last["metrics"].(map[string]any)
	if first["status"] != "Succeeded" || last["iteration"] != 2.0 || metrics["accuracy"] != 0.8765 || last["checkpoint"] != "checkpoint_000002" {
		t.Errorf("first run: %v", first)
	}
	for _, key := range []string{"training_iteration", "Name", "Status"} {
		if strings.Contains(out, `"`+key+`"`) {
			t.Errorf("results -o json has the key %q: field names are camelCase:\n%s", key, out)
		}
	}
}

// results RUN -o json prints each report as get -o json does: camelCase names.
func TestResultsOfARunJSON(t *testing.T) {
	code, out, errOut := trainyard("results", filepath.Join(testStorage(t), "fashion-mnist"), "-o", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s%s", code, err, out, errOut)
	}
	metrics, _ := rows[1]["metrics"].(map[string]any)
	if len(rows) != 2 || rows[1]["iteration"] != 2.0 || rows[1]["timeThisIterS"] != 1.5 || metrics["loss"] != 0.41234567 ||
		strings.Contains(out, "training_iteration") {
		t.Errorf("results -o json:\n%s", out)
	}
}

// Nothing is [] in JSON, and a sentence in a table.
func TestResultsOfNothing(t *testing.T) {
	empty, missing := t.TempDir(), filepath.Join(t.TempDir(), "nope")
	run := makeRun(t, t.TempDir(), "quiet", v1.PhaseSucceeded, time.Minute)
	cases := map[string]struct {
		args []string
		want string
	}{
		"an empty storage path, JSON":    {args: []string{"results", "--storage-path", empty, "-o", "json"}, want: "[]\n"},
		"a missing storage path, JSON":   {args: []string{"results", "--storage-path", missing, "-o", "json"}, want: "[]\n"},
		"a missing storage path, table":  {args: []string{"results", "--storage-path", missing}, want: "No runs in " + missing + ".\n"},
		"a run without results, JSON":    {args: []string{"results", run, "-o", "json"}, want: "[]\n"},
		"a run without results, a table": {args: []string{"results", run}, want: "No results: the job never called trainyard.report().\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := trainyard(tc.args...)
			if code != 0 || out != tc.want {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tc.args, code, out, errOut, tc.want)
			}
		})
	}
}
