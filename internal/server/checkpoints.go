package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
)

// checkpoints answers GET /api/v1/jobs/{id}/checkpoints: every checkpoint the job
// committed, kept or since deleted by its retention, oldest first.
func (s *Server) checkpoints(w http.ResponseWriter, r *http.Request) {
	j, err := s.nativeJob(r)
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	spec, err := decodeSpec(j)
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	out, err := CheckpointList(rundir.ResultsDir(j.RunDir), spec.Spec.Checkpoints.ScoreMetric)
	if err != nil {
		s.writeError(w, r, native, fmt.Errorf("job %s: %w", j.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// CheckpointList lists the checkpoints of a run folder: the committed ones it keeps,
// from their manifests (iteration, metrics, size), then those its results name but it
// no longer holds (deleted by the retention policy), oldest first; the score is the
// scoreMetric's value, when the job has one.
func CheckpointList(dir, scoreMetric string) (Checkpoints, error) {
	out := Checkpoints{ScoreMetric: scoreMetric, Checkpoints: []Checkpoint{}}
	if dir == "" {
		return out, nil
	}
	kept, err := CheckpointNames(dir)
	if err != nil {
		return out, err
	}
	seen := map[string]bool{}
	add := func(c Checkpoint) {
		if c.Metrics != nil && scoreMetric != "" {
			if v, ok := c.Metrics[scoreMetric]; ok {
				c.Score = &v
			}
		}
		out.Checkpoints = append(out.Checkpoints, c)
		seen[c.Name] = true
	}
	for _, name := range kept {
		c := Checkpoint{Name: name, Kept: true}
		if m, err := checkpoint.ReadManifest(filepath.Join(dir, name)); err == nil {
			c.Iteration, c.Time, c.Metrics = m.Meta.Iteration, m.Meta.Time, Metrics(m.Meta.Metrics)
			for _, f := range m.Files {
				c.SizeBytes += f.Size
			}
		}
		add(c)
	}
	err = reporting.ScanResultLines(dir, func(_ int, line []byte) error {
		if !bytes.Contains(line, []byte(`"checkpoint":`)) {
			return nil
		}
		var r reporting.Result
		if json.Unmarshal(line, &r) != nil || r.Checkpoint == "" || seen[r.Checkpoint] {
			return nil
		}
		add(Checkpoint{Name: r.Checkpoint, Iteration: r.Iteration, Time: r.Timestamp, Metrics: Metrics(r.Metrics)})
		return nil
	})
	slices.SortStableFunc(out.Checkpoints, func(a, b Checkpoint) int { return a.Iteration - b.Iteration })
	return out, err
}
