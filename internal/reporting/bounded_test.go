package reporting

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Results keeps the count, the last result and the last checkpoint, and finds them again
// when a run continues.
func TestResultsSummary(t *testing.T) {
	dir := t.TempDir()
	r := openResults(t, dir)
	if got := r.Summary(); got.Count != 0 || got.Checkpoint != "" {
		t.Errorf("Summary of an empty folder = %+v", got)
	}
	rows := []Result{
		result(1, "", map[string]float64{"loss": 0.5}),
		result(2, "checkpoint_000001", map[string]float64{"loss": 0.25}),
		result(3, "", map[string]float64{"loss": 0.125}),
	}
	appendAll(t, r, rows...)
	want := Summary{Count: 3, Last: rows[2], Checkpoint: "checkpoint_000001"}
	if diff := cmp.Diff(want, r.Summary()); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, openResults(t, dir).Summary()); diff != "" {
		t.Errorf("Summary of the reopened results (-want +got):\n%s", diff)
	}
}

// A week of reports costs no memory: Results holds none of them.
func TestResultsMemoryBounded(t *testing.T) {
	dir := t.TempDir()
	r := openResults(t, dir)
	defer r.Close()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	appendAll(t, r, result(1, "", map[string]float64{"loss": 1, "acc": 0}))
	before := heap()
	const n = 100_000
	for i := 2; i <= n; i++ {
		if err := r.Append(result(i, "", map[string]float64{"loss": 1 / float64(i), "acc": float64(i) / n})); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	if after > before+8<<20 {
		t.Errorf("the heap grew by %d MiB over %d results; want it flat", (after-before)>>20, n)
	}
	if got := strings.Count(readFile(t, dir, ProgressFile), "\n"); got != n+1 {
		t.Errorf("%s has %d lines, want %d", ProgressFile, got, n+1)
	}
}

// progress.csv has at most MaxCSVMetrics metric columns; later metrics are in result.json.
func TestResultsColumnLimit(t *testing.T) {
	dir := t.TempDir()
	r := openResults(t, dir)
	many := map[string]float64{}
	for i := range MaxCSVMetrics {
		many[fmt.Sprintf("m%04d", i)] = float64(i)
	}
	appendAll(t, r, result(1, "", many), result(2, "", map[string]float64{"late": 1, "m0000": 2}))
	if got := r.Omitted(); got != "late" {
		t.Errorf("Omitted() = %q, want late", got)
	}
	header, _, _ := strings.Cut(readFile(t, dir, ProgressFile), "\n")
	if got := len(strings.Split(header, ",")); got != len(fixedColumns)+MaxCSVMetrics {
		t.Errorf("%s has %d columns, want %d", ProgressFile, got, len(fixedColumns)+MaxCSVMetrics)
	}
	if rows := readResults(t, dir); rows[1].Metrics["late"] != 1 {
		t.Errorf("%s lacks the metric left out of %s: %v", ResultFile, ProgressFile, rows[1].Metrics)
	}
}

// ReadElided, holding a window of results, prints the table WriteTable prints of all.
func TestReadElided(t *testing.T) {
	for _, n := range []int{0, 1, 5, 6, 7, 12, 25} {
		dir := t.TempDir()
		r := openResults(t, dir)
		for _, row := range tableRows(n) {
			row.Timestamp = at(row.Iteration)
			appendAll(t, r, row)
		}
		r.Close()
		all := readResults(t, dir)
		for _, maxRows := range []int{0, 1, 5, 6, 20} {
			var want, got bytes.Buffer
			if err := WriteTable(&want, all, maxRows); err != nil {
				t.Fatal(err)
			}
			rows, skipped, err := ReadElided(dir, maxRows)
			if err != nil {
				t.Fatal(err)
			}
			if err := WriteElided(&got, rows, skipped); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.String(), got.String()); diff != "" {
				t.Errorf("%d results, at most %d rows (-WriteTable +ReadElided):\n%s", n, maxRows, diff)
			}
		}
	}
}

// A client that pipelines many requests before reading any reply (the helper reads them
// only before its next request) is served: the server goes on reading requests while its
// replies wait to be read, instead of both sides waiting for the other to read.
func TestServerPipelinedClientThatReadsLate(t *testing.T) {
	const n = 20_000 // about 1.3 MB of requests: far more than the sockets' buffers
	c := dial(t, listen(t, &fakeHandler{}).Path)
	if err := c.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var batch strings.Builder
	for i := 1; i <= n; i++ {
		batch.WriteString(request(i, "", "") + "\n")
	}
	if _, err := c.conn.Write([]byte(batch.String())); err != nil {
		t.Fatalf("sending %d requests before reading a reply: %v (the server stopped reading)", n, err)
	}
	for i := 1; i <= n; i++ {
		got, err := c.readLine()
		if want := fmt.Sprintf(`{"checkpoint":null,"iteration":%d,"ok":true}`, i); err != nil || got != want {
			t.Fatalf("reply %d: %q, %v; want %q", i, got, err, want)
		}
	}
}
