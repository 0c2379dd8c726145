package reporting

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The iteration of a result line is read without decoding it, and a line where that
// cannot be done is decoded; a cut line is skipped.
func TestScanResultLines(t *testing.T) {
	dir := t.TempDir()
	var lines []byte
	for i, r := range []Result{
		{Iteration: 7, Metrics: map[string]float64{"loss": 0.5}},
		{Iteration: 8, Metrics: map[string]float64{`a"training_iteration":99`: 1}}, // a hostile metric name
		{Iteration: 12345},
	} {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if it, ok := lineIteration(data); !ok || it != 8 {
				t.Errorf("lineIteration(%s) = %d, %v; want 8", data, it, ok)
			}
		}
		lines = append(append(lines, data...), '\n')
	}
	lines = append(lines, `{"attempt":1,"training_iteration":13}`+"\n"...)   // decoded the fast way
	lines = append(lines, `{"training_iteration": 14, "attempt":1}`+"\n"...) // a space: decoded fully
	lines = append(lines, `{"training_iteration":15,"loss":0.`...)           // cut by a crash
	if err := os.WriteFile(filepath.Join(dir, ResultFile), lines, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []int
	if err := ScanResultLines(dir, func(it int, _ []byte) error { got = append(got, it); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []int{7, 8, 12345, 13, 14}
	if len(got) != len(want) {
		t.Fatalf("iterations %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("iterations %v, want %v", got, want)
		}
	}
}
