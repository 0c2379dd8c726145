package reporting

import (
	"os"
	"path/filepath"
	"testing"
)

// The last result is read from the end of result.json, however long the file is; a run
// without results has none.
func TestLastResult(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := LastResult(dir); ok || err != nil {
		t.Fatalf("LastResult of a folder without result.json = %v, %v; want none, no error", ok, err)
	}
	r := openResults(t, dir)
	for i := 1; i <= 5000; i++ {
		appendAll(t, r, result(i, "", map[string]float64{"loss": float64(i)}))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(dir, ResultFile)); err != nil || info.Size() <= lastReportBytes {
		t.Fatalf("result.json is not longer than what LastResult reads (%v)", err)
	}
	last, ok, err := LastResult(dir)
	if err != nil || !ok || last.Iteration != 5000 || last.Metrics["loss"] != 5000 {
		t.Errorf("LastResult = %+v, %v, %v; want iteration 5000", last, ok, err)
	}
}
