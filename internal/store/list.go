package store

import (
	"bytes"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Filter selects jobs for List. The zero value selects every job.
type Filter struct {
	// Statuses keeps the jobs in one of these statuses; empty keeps every status.
	Statuses []Status
	// Limit is the most jobs returned, the first ones in Seq order; 0 or less: no limit.
	Limit int
}

// List returns the jobs that f selects, in Seq (submit) order. It reads only the index of
// the statuses asked for, so listing pending jobs does not read finished ones. It fails
// with ErrInvalid for an unknown status. The caller owns the returned Jobs.
func (s *Store) List(f Filter) ([]*Job, error) {
	sts, err := f.statuses()
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	var out []*Job
	err = s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = list(tx, sts, f.Limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// Count returns how many jobs f selects, its Limit aside: the sizes of the index buckets
// of its statuses, without reading a job.
func (s *Store) Count(f Filter) (int, error) {
	sts, err := f.statuses()
	if err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	}
	n := 0
	err = s.db.View(func(tx *bolt.Tx) error {
		for _, st := range sts {
			n += statusBucket(tx, st).Stats().KeyN
		}
		return nil
	})
	return n, err
}

// statuses returns the statuses to read, without repeats; every status when none is asked.
func (f Filter) statuses() ([]Status, error) {
	if len(f.Statuses) == 0 {
		return statuses(), nil
	}
	var sts []Status
	for _, st := range f.Statuses {
		if !st.Known() {
			return nil, fmt.Errorf("unknown status %q: %w", st, ErrInvalid)
		}
		if !slices.Contains(sts, st) {
			sts = append(sts, st)
		}
	}
	return sts, nil
}

// list merges the index buckets of sts (each in Seq order) and reads each job they name.
func list(tx *bolt.Tx, sts []Status, limit int) ([]*Job, error) {
	heads := make([]indexCursor, 0, len(sts))
	for _, st := range sts {
		c := statusBucket(tx, st).Cursor()
		k, v := c.First()
		heads = append(heads, indexCursor{c: c, k: k, v: v})
	}
	jobs := tx.Bucket(bucketJobs)
	var out []*Job
	for limit <= 0 || len(out) < limit {
		next := nextIndex(heads)
		if next == nil {
			break
		}
		b := jobs.Get(next.v)
		if b == nil {
			return nil, fmt.Errorf("index names job %q, which has no record", next.v)
		}
		j, err := decodeRecord(string(next.v), b)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
		next.k, next.v = next.c.Next()
	}
	return out, nil
}

// indexCursor is a position in one status's index: key (Seq) and value (ID), or a nil key
// at the end.
type indexCursor struct {
	c    *bolt.Cursor
	k, v []byte
}

// nextIndex returns the cursor with the lowest Seq, or nil when all are at their end.
func nextIndex(heads []indexCursor) *indexCursor {
	var lowest *indexCursor
	for i := range heads {
		h := &heads[i]
		if h.k != nil && (lowest == nil || bytes.Compare(h.k, lowest.k) < 0) {
			lowest = h
		}
	}
	return lowest
}

// Counts returns how many jobs have each status, every status included (0 when none), for
// the server's metrics.
func (s *Store) Counts() (map[Status]int, error) {
	counts := make(map[Status]int)
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, st := range statuses() {
			counts[st] = statusBucket(tx, st).Stats().KeyN
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return counts, nil
}
