package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Jobs by name: bucket "names" holds one key per job that has a Name, the name, a zero
// byte and the job's ID, with an empty value, so the jobs of one name are the keys that
// start with the name and a zero byte. Create, Update and Delete keep it; Open rebuilds it
// from the jobs, so a file written by a trainyard without the index (or a downgrade and
// upgrade) is indexed correctly.

// bucketNames is the by-name index.
var bucketNames = []byte("names")

// ErrNameTaken: CreateUnique was given a Name that another job has.
var ErrNameTaken = errors.New("job name taken")

// NameTakenError is CreateUnique's refusal of a name that other jobs have; it matches
// ErrNameTaken.
type NameTakenError struct {
	// Name is the name asked for.
	Name string
	// IDs are the IDs of the jobs that have it, in submit order.
	IDs []string
}

// Error says which jobs have the name.
func (e *NameTakenError) Error() string {
	return fmt.Sprintf("name %q is taken by job %s", e.Name, strings.Join(e.IDs, ", "))
}

// Is makes errors.Is(err, ErrNameTaken) true.
func (e *NameTakenError) Is(target error) bool { return target == ErrNameTaken }

// CreateUnique is Create, but it also fails, with a *NameTakenError, when j has a Name
// and another job has the same one. The check and the creation are one transaction, so
// of two concurrent creations with one name only one succeeds. A job without a name is
// never refused for it.
func (s *Store) CreateUnique(j *Job) error {
	rec := *j
	if rec.Status == "" {
		rec.Status = Pending
	}
	rec.Version = 1
	if err := rec.validate(); err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := checkName(tx, rec.Name); err != nil {
			return err
		}
		return create(tx, &rec)
	})
	if err != nil {
		return fmt.Errorf("create job %q: %w", j.ID, err)
	}
	*j = rec
	return nil
}

// ByName returns the jobs whose Name is name, in submit (Seq) order: none, one, or
// several if they were created with Create, which does not check names. An empty name
// matches no job. The caller owns the returned Jobs.
func (s *Store) ByName(name string) ([]*Job, error) {
	if name == "" {
		return nil, nil
	}
	var out []*Job
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, id := range namedIDs(tx, name) {
			j, err := get(tx, id)
			if err != nil {
				return fmt.Errorf("name index names job %q: %w", id, err)
			}
			out = append(out, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find jobs named %q: %w", name, err)
	}
	slices.SortFunc(out, func(a, b *Job) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// checkName returns a *NameTakenError when a job has the name.
func checkName(tx *bolt.Tx, name string) error {
	if name == "" {
		return nil
	}
	ids := namedIDs(tx, name)
	if len(ids) == 0 {
		return nil
	}
	jobs := make([]*Job, 0, len(ids))
	for _, id := range ids {
		j, err := get(tx, id)
		if err != nil {
			return fmt.Errorf("name index names job %q: %w", id, err)
		}
		jobs = append(jobs, j)
	}
	slices.SortFunc(jobs, func(a, b *Job) int { return cmp.Compare(a.Seq, b.Seq) })
	taken := &NameTakenError{Name: name}
	for _, j := range jobs {
		taken.IDs = append(taken.IDs, j.ID)
	}
	return taken
}

// namedIDs returns the IDs of the jobs with the name, in ID order.
func namedIDs(tx *bolt.Tx, name string) []string {
	prefix := nameKey(name, "")
	var ids []string
	c := tx.Bucket(bucketNames).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, string(k[len(prefix):]))
	}
	return ids
}

// nameKey is the index key of a job: its name, a zero byte and its ID.
func nameKey(name, id string) []byte {
	k := make([]byte, 0, len(name)+1+len(id))
	k = append(k, name...)
	k = append(k, 0)
	return append(k, id...)
}

// indexName adds a job to the index, if it has a name.
func indexName(tx *bolt.Tx, j *Job) error {
	if j.Name == "" {
		return nil
	}
	return tx.Bucket(bucketNames).Put(nameKey(j.Name, j.ID), nil)
}

// unindexName removes a job from the index.
func unindexName(tx *bolt.Tx, j *Job) error {
	if j.Name == "" {
		return nil
	}
	return tx.Bucket(bucketNames).Delete(nameKey(j.Name, j.ID))
}

// renameIndex moves a job's index entry when an update changed its name from old.
func renameIndex(tx *bolt.Tx, old string, j *Job) error {
	if old == j.Name {
		return nil
	}
	if err := unindexName(tx, &Job{ID: j.ID, Name: old}); err != nil {
		return err
	}
	return indexName(tx, j)
}

// buildNameIndex makes the index anew from the jobs' records.
func buildNameIndex(tx *bolt.Tx) error {
	if tx.Bucket(bucketNames) != nil {
		if err := tx.DeleteBucket(bucketNames); err != nil {
			return err
		}
	}
	names, err := tx.CreateBucket(bucketNames)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketJobs).ForEach(func(id, b []byte) error {
		name, err := recordName(id, b)
		if err != nil || name == "" {
			return err
		}
		return names.Put(nameKey(name, string(id)), nil)
	})
}

// recordName reads only the name of a stored record.
func recordName(id, b []byte) (string, error) {
	if len(b) == 0 || b[0] != recordV1 {
		return "", fmt.Errorf("decode job %q: unknown record version: %w", id, errCorrupt)
	}
	hb, _, err := cutLen(b[1:])
	if err != nil {
		return "", fmt.Errorf("decode job %q: %w", id, err)
	}
	var head struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(hb, &head); err != nil {
		return "", fmt.Errorf("decode job %q: %w", id, err)
	}
	return head.Name, nil
}
