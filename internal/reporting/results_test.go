package reporting

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// at is a fixed time, i seconds and a half after 2023-11-14 22:13:20 UTC.
func at(i int) time.Time { return time.Unix(1700000000+int64(i), 500e6) }

// result returns iteration i of attempt 1, with the given metrics and checkpoint.
func result(i int, checkpoint string, metrics map[string]float64) Result {
	return Result{Iteration: i, Timestamp: at(i), TimeThisIterS: 1.25, TimeTotalS: 1.25 * float64(i),
		Attempt: 1, Checkpoint: checkpoint, Metrics: metrics}
}

// appendAll appends rows to r.
func appendAll(t *testing.T, r *Results, rows ...Result) {
	t.Helper()
	for _, row := range rows {
		if err := r.Append(row); err != nil {
			t.Fatalf("Append iteration %d: %v", row.Iteration, err)
		}
	}
}

// openResults opens the results of dir.
func openResults(t *testing.T, dir string) *Results {
	t.Helper()
	r, err := OpenResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readFile returns the content of dir/name.
func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// readResults returns ReadResults of dir, failing the test on an error.
func readResults(t *testing.T, dir string) []Result {
	t.Helper()
	rows, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestResultsAppend(t *testing.T) {
	dir := t.TempDir()
	r := openResults(t, dir)
	if _, ok := r.Last(); ok {
		t.Fatal("Last of an empty folder: ok")
	}
	rows := []Result{
		result(1, "", map[string]float64{"loss": 0.5, "epoch": 0}),
		result(2, "checkpoint_000001", map[string]float64{"loss": 0.25, "epoch": 1}),
	}
	appendAll(t, r, rows...)
	wantJSON := `{"attempt":1,"epoch":0,"loss":0.5,"time_this_iter_s":1.25,"time_total_s":1.25,"timestamp":"2023-11-14T22:13:21.5Z","training_iteration":1}
{"attempt":1,"checkpoint":"checkpoint_000001","epoch":1,"loss":0.25,"time_this_iter_s":1.25,"time_total_s":2.5,"timestamp":"2023-11-14T22:13:22.5Z","training_iteration":2}
`
	if diff := cmp.Diff(wantJSON, readFile(t, dir, ResultFile)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", ResultFile, diff)
	}
	wantCSV := `training_iteration,timestamp,time_this_iter_s,time_total_s,attempt,checkpoint,epoch,loss
1,1700000001.500,1.250,1.250,1,,0,0.5
2,1700000002.500,1.250,2.500,1,checkpoint_000001,1,0.25
`
	if diff := cmp.Diff(wantCSV, readFile(t, dir, ProgressFile)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", ProgressFile, diff)
	}
	if diff := cmp.Diff(rows, readResults(t, dir)); diff != "" {
		t.Errorf("ReadResults (-want +got):\n%s", diff)
	}
	if last, _ := r.Last(); last.Iteration != 2 {
		t.Errorf("Last().Iteration = %d, want 2", last.Iteration)
	}
}

// TestResultsNewMetric checks that a metric first seen in a later result adds a column to
// progress.csv, with empty cells in the rows before, and that a continued run (a new
// Results on the same folder) keeps the columns and appends.
func TestResultsNewMetric(t *testing.T) {
	dir := t.TempDir()
	appendAll(t, openResults(t, dir),
		result(1, "", map[string]float64{"loss": 0.5}),
		result(2, "", map[string]float64{"loss": 0.25}),
		result(3, "checkpoint_000001", map[string]float64{"loss": 0.125, "acc": 0.75}),
		result(4, "", map[string]float64{"acc": 0.875}))
	wantCSV := `training_iteration,timestamp,time_this_iter_s,time_total_s,attempt,checkpoint,loss,acc
1,1700000001.500,1.250,1.250,1,,0.5,
2,1700000002.500,1.250,2.500,1,,0.25,
3,1700000003.500,1.250,3.750,1,checkpoint_000001,0.125,0.75
4,1700000004.500,1.250,5.000,1,,,0.875
`
	if diff := cmp.Diff(wantCSV, readFile(t, dir, ProgressFile)); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", ProgressFile, diff)
	}

	r := openResults(t, dir)
	if last, _ := r.Last(); last.Iteration != 4 {
		t.Errorf("reopened: Last().Iteration = %d, want 4", last.Iteration)
	}
	appendAll(t, r, result(5, "", map[string]float64{"acc": 1, "loss": 0}))
	wantCSV += "5,1700000005.500,1.250,6.250,1,,0,1\n"
	if diff := cmp.Diff(wantCSV, readFile(t, dir, ProgressFile)); diff != "" {
		t.Errorf("reopened, appended: %s (-want +got):\n%s", ProgressFile, diff)
	}
	if got := strings.Count(readFile(t, dir, ResultFile), "\n"); got != 5 {
		t.Errorf("%s has %d lines, want 5", ResultFile, got)
	}
	if got := len(readResults(t, dir)); got != 5 {
		t.Errorf("ReadResults: %d results, want 5", got)
	}
}

// TestResultsTruncatedLastLine checks that a last line cut short by a crash is ignored,
// and that it spoils neither the next result's line when the run continues nor
// progress.csv.
func TestResultsTruncatedLastLine(t *testing.T) {
	dir := t.TempDir()
	rows := []Result{result(1, "", map[string]float64{"loss": 0.5}), result(2, "", map[string]float64{"loss": 0.25})}
	appendAll(t, openResults(t, dir), rows...)
	appendText(t, filepath.Join(dir, ResultFile), `{"attempt":1,"loss":0.1,"time_th`)
	appendText(t, filepath.Join(dir, ProgressFile), `3,17000`)
	if diff := cmp.Diff(rows, readResults(t, dir)); diff != "" {
		t.Fatalf("ReadResults of a cut line (-want +got):\n%s", diff)
	}

	r := openResults(t, dir)
	next := result(3, "", map[string]float64{"loss": 0.125})
	appendAll(t, r, next)
	if diff := cmp.Diff(append(rows, next), readResults(t, dir)); diff != "" {
		t.Errorf("ReadResults after the run continued (-want +got):\n%s", diff)
	}
	wantCSV := `training_iteration,timestamp,time_this_iter_s,time_total_s,attempt,checkpoint,loss
1,1700000001.500,1.250,1.250,1,,0.5
2,1700000002.500,1.250,2.500,1,,0.25
3,1700000003.500,1.250,3.750,1,,0.125
`
	if diff := cmp.Diff(wantCSV, readFile(t, dir, ProgressFile)); diff != "" {
		t.Errorf("%s after the run continued (-want +got):\n%s", ProgressFile, diff)
	}
}

// appendText appends text to the file at path, as a write cut short by a crash leaves it.
func appendText(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestResultsNonFinite(t *testing.T) {
	dir := t.TempDir()
	row := result(1, "", map[string]float64{"nan": math.NaN(), "up": math.Inf(1), "down": math.Inf(-1), "tiny": 5e-324})
	appendAll(t, openResults(t, dir), row)
	line := readFile(t, dir, ResultFile)
	for _, want := range []string{`"nan":"NaN"`, `"up":"Infinity"`, `"down":"-Infinity"`, `"tiny":5e-324`} {
		if !strings.Contains(line, want) {
			t.Errorf("%s line %s lacks %s", ResultFile, line, want)
		}
	}
	if diff := cmp.Diff([]Result{row}, readResults(t, dir), cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("ReadResults (-want +got):\n%s", diff)
	}
	wantCSV := "training_iteration,timestamp,time_this_iter_s,time_total_s,attempt,checkpoint,down,nan,tiny,up\n" +
		"1,1700000001.500,1.250,1.250,1,,-Inf,NaN,5e-324,+Inf\n"
	if diff := cmp.Diff(wantCSV, readFile(t, dir, ProgressFile)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", ProgressFile, diff)
	}
}

func TestReadResultsNoFile(t *testing.T) {
	rows, err := ReadResults(t.TempDir())
	if rows != nil || err != nil {
		t.Errorf("ReadResults of an empty folder = %v, %v; want nil, nil", rows, err)
	}
}
