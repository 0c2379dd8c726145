package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/trainyard/trainyard/internal/reporting"
)

// writeResults writes n results (iterations 1..n, loss = 1/iteration) into a run folder.
func writeResults(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, reporting.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for i := 1; i <= n; i++ {
		if err := enc.Encode(reporting.Result{Iteration: i, Attempt: 1, Metrics: map[string]float64{"loss": 1 / float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A long run's results are thinned to the asked maximum, keeping the first and the last;
// ?after returns only the new ones.
func TestReadResults(t *testing.T) {
	dir := writeResults(t, 1000)
	cases := []struct {
		after, limit, wantLen, wantTotal int
		first, last                      int
	}{
		{0, 5000, 1000, 1000, 1, 1000},
		{0, 100, 92, 1000, 1, 1000}, // every 11th (91 of them) and the last
		{0, 7, 7, 1000, 1, 1000},    // every 167th (6 of them) and the last
		{0, 1, 1, 1000, 1000, 1000},
		{990, 5000, 10, 10, 991, 1000},
		{1000, 5000, 0, 0, 0, 0},
	}
	for _, c := range cases {
		got, err := ReadResultList(dir, c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Results) != c.wantLen || got.Total != c.wantTotal {
			t.Errorf("after %d max %d: %d results of %d, want %d of %d", c.after, c.limit, len(got.Results), got.Total, c.wantLen, c.wantTotal)
			continue
		}
		if c.wantLen > 0 && (got.Results[0].Iteration != c.first || got.Results[len(got.Results)-1].Iteration != c.last) {
			t.Errorf("after %d max %d: iterations %d..%d, want %d..%d", c.after, c.limit,
				got.Results[0].Iteration, got.Results[len(got.Results)-1].Iteration, c.first, c.last)
		}
	}
	if got, err := ReadResultList(t.TempDir(), 0, 10); err != nil || got.Total != 0 || got.Results == nil {
		t.Errorf("a run without results: %+v, %v", got, err)
	}
}
