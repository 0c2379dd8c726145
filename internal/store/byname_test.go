package store

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

// named returns a pending test job with the ID and name.
func named(id, name string) *Job {
	j := testJob(id).obj()
	j.Name = name
	return j
}

// byName returns the IDs of the jobs with the name.
func byName(t *testing.T, s *Store, name string) []string {
	t.Helper()
	jobs, err := s.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return ids(jobs)
}

func TestByNameFollowsCreateUpdateDelete(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, named("b", "bert"), named("a", "bert"), named("c", "mnist"), named("d", ""))
	if diff := cmp.Diff([]string{"b", "a"}, byName(t, s, "bert")); diff != "" {
		t.Errorf("ByName(bert), in submit order (-want +got):\n%s", diff)
	}
	if got := byName(t, s, ""); len(got) != 0 {
		t.Errorf("ByName(\"\") = %v, want none", got)
	}
	if got := byName(t, s, "ber"); len(got) != 0 {
		t.Errorf("ByName(ber), a prefix of a name = %v, want none", got)
	}
	if _, err := s.Update("a", func(j *Job) error { j.Name = "mnist"; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if got := byName(t, s, "bert"); len(got) != 0 {
		t.Errorf("ByName(bert) after a rename and a delete = %v, want none", got)
	}
	if diff := cmp.Diff([]string{"a", "c"}, byName(t, s, "mnist")); diff != "" {
		t.Errorf("ByName(mnist) (-want +got):\n%s", diff)
	}
}

func TestCreateUniqueRefusesATakenName(t *testing.T) {
	s := openTemp(t)
	if err := s.CreateUnique(named("a", "bert")); err != nil {
		t.Fatal(err)
	}
	err := s.CreateUnique(named("b", "bert"))
	var taken *NameTakenError
	if !errors.As(err, &taken) || !errors.Is(err, ErrNameTaken) {
		t.Fatalf("CreateUnique of a taken name: %v, want a *NameTakenError", err)
	}
	if diff := cmp.Diff(&NameTakenError{Name: "bert", IDs: []string{"a"}}, taken); diff != "" {
		t.Errorf("refusal (-want +got):\n%s", diff)
	}
	if _, err := s.Get("b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused job was stored: %v", err)
	}
	for _, j := range []*Job{named("c", ""), named("d", "")} {
		if err := s.CreateUnique(j); err != nil {
			t.Errorf("a job without a name: %v", err)
		}
	}
	if err := s.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateUnique(named("e", "bert")); err != nil {
		t.Errorf("the name of a deleted job: %v", err)
	}
}

// Of many concurrent creations with one name, exactly one succeeds.
func TestCreateUniqueConcurrent(t *testing.T) {
	s := openTemp(t)
	const n = 8
	var (
		wg   sync.WaitGroup
		errs = make([]error, n)
	)
	for i := range n {
		wg.Go(func() { errs[i] = s.CreateUnique(named(string(rune('a'+i)), "sweep")) })
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, ErrNameTaken):
			t.Errorf("unexpected error: %v", err)
		}
	}
	if created != 1 || len(byName(t, s, "sweep")) != 1 {
		t.Errorf("%d of %d creations succeeded, %d jobs named sweep; want 1", created, n, len(byName(t, s, "sweep")))
	}
}

// A file whose index is missing (written by a trainyard without it) is indexed at Open.
func TestOpenRebuildsTheNameIndex(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, named("a", "bert"), named("b", "mnist"))
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketNames) }); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	if diff := cmp.Diff([]string{"a"}, byName(t, s, "bert")); diff != "" {
		t.Errorf("ByName(bert) after reopening (-want +got):\n%s", diff)
	}
	if err := s.CreateUnique(named("c", "mnist")); !errors.Is(err, ErrNameTaken) {
		t.Errorf("CreateUnique of a name taken before the index existed: %v", err)
	}
}
