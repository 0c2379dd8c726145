package jobs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/trainyard/trainyard/internal/store"
)

// ErrAmbiguous: a name given to find a job is that of several jobs.
var ErrAmbiguous = errors.New("several jobs have that name")

// AmbiguousError is Find's answer when several jobs have the name it was given (they were
// submitted before names were unique); it matches ErrAmbiguous.
type AmbiguousError struct {
	// Name is the name given.
	Name string
	// IDs are the IDs of the jobs that have it, in submit order.
	IDs []string
}

// Error lists the jobs and says what to give instead.
func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%d jobs are named '%s': %s; give the ID of one of them", len(e.IDs), e.Name, strings.Join(e.IDs, ", "))
}

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// Find returns the job that ref names: the job whose ID is ref, or else the one whose
// name is ref. It fails with store.ErrNotFound when no job has that ID or name, and with
// an *AmbiguousError when several jobs have that name.
func (s *Service) Find(ref string) (*store.Job, error) {
	j, err := s.cfg.Store.Get(ref)
	if !errors.Is(err, store.ErrNotFound) {
		return j, err
	}
	named, err := s.cfg.Store.ByName(ref)
	if err != nil {
		return nil, err
	}
	switch len(named) {
	case 0:
		return nil, fmt.Errorf("no job with id or name '%s': %w", ref, store.ErrNotFound)
	case 1:
		return named[0], nil
	}
	amb := &AmbiguousError{Name: ref}
	for _, j := range named {
		amb.IDs = append(amb.IDs, j.ID)
	}
	return nil, amb
}
