package reporting

import "github.com/trainyard/trainyard/internal/checkpoint"

// openReadOnly opens the checkpoints and results of a secondary session for reading.
func (s *Session) openReadOnly() error {
	var err error
	if s.store, err = checkpoint.Inspect(s.dir); err != nil {
		return err
	}
	s.results = &Results{dir: s.dir}
	return ScanResults(s.dir, func(res Result) error {
		s.results.summary.add(res)
		return nil
	})
}

// iterationBefore returns the run's last iteration in the attempts before attempt, from
// the results worker 0 writes: a secondary counts its ranks' reports from there, as worker
// 0 does, even when worker 0's rank 0 has reported in this attempt already.
func iterationBefore(dir string, attempt int) (int, error) {
	last := 0
	err := ScanResults(dir, func(r Result) error {
		if r.Attempt < attempt {
			last = max(last, r.Iteration)
		}
		return nil
	})
	return last, err
}
