package server

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/reporting"
)

// The checkpoints of a run: those the retention kept, from their manifests (iteration,
// score, size), and those it deleted, from the results that named them.
func TestCheckpointList(t *testing.T) {
	dir := t.TempDir()
	store, err := checkpoint.Open(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, reporting.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(f)
	for i, acc := range []float64{0.5, 0.9, 0.7, 0.8} {
		src := t.TempDir()
		if err := os.WriteFile(filepath.Join(src, "model.pt"), make([]byte, 1000*(i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		metrics := map[string]float64{"acc": acc}
		info, err := store.Commit(src, checkpoint.Meta{Iteration: i + 1, Attempt: 1, Metrics: metrics, Time: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(reporting.Result{Iteration: i + 1, Attempt: 1, Checkpoint: info.Name, Metrics: metrics}); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if _, err := store.Retain(checkpoint.Policy{Keep: 2, Score: "acc"}); err != nil {
		t.Fatal(err)
	}

	got, err := CheckpointList(dir, "acc")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		it    int
		score float64
		size  int64
		kept  bool
	}
	var rows []row
	for _, c := range got.Checkpoints {
		r := row{it: c.Iteration, size: c.SizeBytes, kept: c.Kept}
		if c.Score != nil {
			r.score = *c.Score
		}
		rows = append(rows, r)
	}
	// Keep 2 by acc: 0.9 (iteration 2) and 0.8 (4); the latest (4) is kept anyway.
	want := []row{{1, 0.5, 0, false}, {2, 0.9, 2000, true}, {3, 0.7, 0, false}, {4, 0.8, 4000, true}}
	if len(rows) != len(want) {
		t.Fatalf("checkpoints %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("checkpoint %d: %+v, want %+v", i, rows[i], want[i])
		}
	}
	if got.ScoreMetric != "acc" {
		t.Errorf("score metric %q", got.ScoreMetric)
	}
}
