package reporting

import "github.com/trainyard/trainyard/internal/checkpoint"

// openReadOnly opens the checkpoints and results of a secondary session for reading.
func (s *Session) openReadOnly() error {
	var err error
	if s.store, err = checkpoint.Inspect(s.dir); err != nil {
		return err
	}
	rows, err := ReadResults(s.dir)
	if err != nil {
		return err
	}
	s.results = &Results{dir: s.dir, rows: rows}
	return nil
}

// iterationBefore returns the run's last iteration in the attempts before attempt, from
// the results worker 0 writes: a secondary counts its ranks' reports from there, as worker
// 0 does, even when worker 0's rank 0 has reported in this attempt already.
func iterationBefore(dir string, attempt int) (int, error) {
	rows, err := ReadResults(dir)
	if err != nil {
		return 0, err
	}
	last := 0
	for _, r := range rows {
		if r.Attempt < attempt {
			last = max(last, r.Iteration)
		}
	}
	return last, nil
}
