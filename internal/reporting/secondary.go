package reporting

import (
	"os"

	"github.com/trainyard/trainyard/internal/checkpoint"
)

// openReadOnly opens the checkpoints and results of a secondary session for reading.
func (s *Session) openReadOnly() error {
	sub, err := s.root.OpenRoot(".")
	if err != nil {
		return err
	}
	if s.store, err = checkpoint.InspectIn(sub); err != nil {
		return err
	}
	s.results = &Results{dir: s.dir, root: s.root}
	return scanResultsIn(s.root, func(res Result) error {
		s.results.summary.add(res)
		return nil
	})
}

// iterationBefore returns the run's last iteration in the attempts before attempt, from
// the results worker 0 writes: a secondary counts its ranks' reports from there, as worker
// 0 does, even when worker 0's rank 0 has reported in this attempt already.
func iterationBefore(root *os.Root, attempt int) (int, error) {
	last := 0
	err := scanResultsIn(root, func(r Result) error {
		if r.Attempt < attempt {
			last = max(last, r.Iteration)
		}
		return nil
	})
	return last, err
}
