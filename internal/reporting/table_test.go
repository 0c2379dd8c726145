package reporting

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tableRows returns n results whose metrics and checkpoints vary like a real run's: the
// loss falls, accuracy is reported from iteration 2, a checkpoint every third iteration.
func tableRows(n int) []Result {
	var rows []Result
	for i := 1; i <= n; i++ {
		m := map[string]float64{"loss": 2.0 / float64(i)}
		if i >= 2 {
			m["accuracy"] = 1 - 1/float64(i*i)
		}
		cp := ""
		if i%3 == 0 {
			cp = fmt.Sprintf("checkpoint_%06d", i/3)
		}
		rows = append(rows, Result{Iteration: i, TimeThisIterS: 12.34, TimeTotalS: 12.34 * float64(i), Attempt: 1,
			Checkpoint: cp, Metrics: m})
	}
	return rows
}

// TestWriteTable compares WriteTable's output with testdata/table_<name>.golden; run
// with -update to rewrite those.
func TestWriteTable(t *testing.T) {
	nonFinite := tableRows(2)
	nonFinite[1].Metrics["loss"] = math.NaN()
	nonFinite[1].Metrics["accuracy"] = math.Inf(-1)
	cases := map[string]struct {
		rows    []Result
		maxRows int
	}{
		"few_rows":   {rows: tableRows(4)},
		"elided":     {rows: tableRows(30), maxRows: 6},
		"elided_odd": {rows: tableRows(12), maxRows: 5},
		"at_limit":   {rows: tableRows(5), maxRows: 5},
		"non_finite": {rows: nonFinite},
		"no_metrics": {rows: []Result{{Iteration: 1, TimeThisIterS: 0.04, TimeTotalS: 0.04}}},
		"no_rows":    {rows: nil, maxRows: 20},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteTable(&buf, tc.rows, tc.maxRows); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "table_"+name+".golden")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), buf.String()); diff != "" {
				t.Errorf("WriteTable output differs from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

func TestMarkGone(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "checkpoint_000002"), 0o755); err != nil {
		t.Fatal(err)
	}
	rows := []Result{{Iteration: 1, Checkpoint: "checkpoint_000001"}, {Iteration: 2, Checkpoint: "checkpoint_000002"}, {Iteration: 3}}
	var got []string
	for _, r := range MarkGone(rows, dir) {
		got = append(got, r.Checkpoint)
	}
	if diff := cmp.Diff([]string{"checkpoint_000001 (gone)", "checkpoint_000002", ""}, got); diff != "" {
		t.Errorf("checkpoints (-want +got):\n%s", diff)
	}
	if rows[0].Checkpoint != "checkpoint_000001" {
		t.Error("MarkGone changed its input")
	}
}
