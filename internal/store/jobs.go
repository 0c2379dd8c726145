package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Create adds j, assigning j.Seq (the next in submit order) and j.Version (1); a Status of
// "" becomes Pending. It fails with ErrExists when a job has j.ID, and with ErrInvalid when
// j has no ID, an unknown Status, or a Spec (or RuntimeEnv) that is not JSON. j is changed
// only when Create succeeds.
func (s *Store) Create(j *Job) error {
	rec := *j
	if rec.Status == "" {
		rec.Status = Pending
	}
	rec.Version = 1
	if err := rec.validate(); err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return create(tx, &rec) }); err != nil {
		return fmt.Errorf("create job %q: %w", j.ID, err)
	}
	*j = rec
	return nil
}

// create assigns rec.Seq and writes the record and its status index entry.
func create(tx *bolt.Tx, rec *Job) error {
	jobs := tx.Bucket(bucketJobs)
	if jobs.Get([]byte(rec.ID)) != nil {
		return ErrExists
	}
	seq, err := jobs.NextSequence()
	if err != nil {
		return err
	}
	rec.Seq = seq
	if err := put(tx, rec); err != nil {
		return err
	}
	if err := indexName(tx, rec); err != nil {
		return err
	}
	return statusBucket(tx, rec.Status).Put(seqKey(rec.Seq), []byte(rec.ID))
}

// Get returns the job with the ID, or ErrNotFound. The caller owns the returned Job.
func (s *Store) Get(id string) (*Job, error) {
	var j *Job
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		j, err = get(tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get job %q: %w", id, err)
	}
	return j, nil
}

// Update changes the job with the ID in one transaction: it reads the job, calls change on
// it, and writes it back with Version incremented. When change returns an error nothing is
// written and Update returns that error (wrapped). change must not alter ID or Seq
// (ErrInvalid) and must not keep the Job it is given; it may run while other writes wait,
// so it should be quick. Update returns the job as written, or ErrNotFound.
func (s *Store) Update(id string, change func(*Job) error) (*Job, error) {
	var j *Job
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		j, err = update(tx, id, change)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update job %q: %w", id, err)
	}
	return j, nil
}

// update reads, changes and writes one job, moving its status index entry if the status
// changed.
func update(tx *bolt.Tx, id string, change func(*Job) error) (*Job, error) {
	j, err := get(tx, id)
	if err != nil {
		return nil, err
	}
	seq, status, version, name := j.Seq, j.Status, j.Version, j.Name
	if err := change(j); err != nil {
		return nil, err
	}
	if j.ID != id || j.Seq != seq {
		return nil, fmt.Errorf("change altered ID or Seq: %w", ErrInvalid)
	}
	if err := j.validate(); err != nil {
		return nil, err
	}
	j.Version = version + 1
	if err := put(tx, j); err != nil {
		return nil, err
	}
	if err := renameIndex(tx, name, j); err != nil {
		return nil, err
	}
	if j.Status == status {
		return j, nil
	}
	if err := statusBucket(tx, status).Delete(seqKey(seq)); err != nil {
		return nil, err
	}
	return j, statusBucket(tx, j.Status).Put(seqKey(j.Seq), []byte(j.ID))
}

// Delete removes the job with the ID, or fails with ErrNotFound.
func (s *Store) Delete(id string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		j, err := get(tx, id)
		if err != nil {
			return err
		}
		if err := statusBucket(tx, j.Status).Delete(seqKey(j.Seq)); err != nil {
			return err
		}
		if err := unindexName(tx, j); err != nil {
			return err
		}
		return tx.Bucket(bucketJobs).Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("delete job %q: %w", id, err)
	}
	return nil
}

// get reads and decodes one job.
func get(tx *bolt.Tx, id string) (*Job, error) {
	b := tx.Bucket(bucketJobs).Get([]byte(id))
	if b == nil {
		return nil, ErrNotFound
	}
	return decodeRecord(id, b)
}

// put writes a job's record (not its index entry).
func put(tx *bolt.Tx, j *Job) error {
	b, err := encodeRecord(j)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketJobs).Put([]byte(j.ID), b)
}

// statusBucket returns the index bucket of one status (Seq -> ID).
func statusBucket(tx *bolt.Tx, st Status) *bolt.Bucket {
	return tx.Bucket(bucketStatus).Bucket([]byte(st))
}

// seqKey is a Seq as an index key: big-endian, so byte order is Seq order.
func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}
