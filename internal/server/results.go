package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
)

// DefaultResultPoints is how many results GET /api/v1/jobs/{id}/results returns at most
// when ?max is not given; MaxResultPoints is the most it returns at all.
const (
	DefaultResultPoints = 5000
	MaxResultPoints     = 200000
)

// results answers GET /api/v1/jobs/{id}/results: the job's reported results, in order,
// with ?after=N only those of iterations after N (a page that follows a run asks for the
// new ones). With more than ?max results (DefaultResultPoints), every k-th is sent, and
// always the last, so that a curve of a long run keeps its shape at a bounded size;
// Total says how many there are.
func (s *Server) results(w http.ResponseWriter, r *http.Request) {
	j, err := s.nativeJob(r)
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	q := r.URL.Query()
	after, err := queryInt(q.Get("after"), "after")
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	limit, err := queryInt(q.Get("max"), "max")
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	if limit == 0 {
		limit = DefaultResultPoints
	}
	if limit > MaxResultPoints {
		s.writeError(w, r, native, invalid("max %d: at most %d", limit, MaxResultPoints))
		return
	}
	out, err := ReadResultList(rundir.ResultsDir(j.RunDir), after, limit)
	if err != nil {
		s.writeError(w, r, native, fmt.Errorf("job %s: %w", j.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// ReadResultList reads the results of a run folder after iteration after, thinned to at
// most limit (always keeping the last). It reads the file twice, first only counting (no
// line decoded), then decoding only the results it keeps, of which it holds no more
// than limit.
func ReadResultList(dir string, after, limit int) (ResultList, error) {
	out := ResultList{Results: []Result{}}
	if dir == "" {
		return out, nil
	}
	err := reporting.ScanResultLines(dir, func(it int, _ []byte) error {
		if it > after {
			out.Total++
		}
		return nil
	})
	if err != nil || out.Total == 0 {
		return out, err
	}
	// Keep every stride-th result before the last, then the last: at most limit.
	stride := 1
	if out.Total > limit && limit > 1 {
		stride = (out.Total + limit - 2) / (limit - 1)
	}
	i := 0
	err = reporting.ScanResultLines(dir, func(it int, line []byte) error {
		if it <= after {
			return nil
		}
		keep := i == out.Total-1 || limit > 1 && i%stride == 0
		i++
		if !keep {
			return nil
		}
		var r reporting.Result
		if err := json.Unmarshal(line, &r); err != nil {
			return nil // a line cut short by a crash
		}
		out.Results = append(out.Results, *ResultOf(r))
		return nil
	})
	return out, err
}
