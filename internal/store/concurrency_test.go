package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConcurrentCreates(t *testing.T) {
	const writers, perWriter = 50, 20
	s := openTemp(t)
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter+4*20)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				errs <- s.Create(testJob(fmt.Sprintf("w%d-%d", w, i)).obj())
			}
		})
	}
	for range 4 { // readers alongside the writers
		wg.Go(func() {
			for range 20 {
				_, err := s.List(Filter{Statuses: []Status{Pending}, Limit: 50})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkAllCreated(t, s, writers*perWriter)
	checkIndex(t, s)
}

// checkAllCreated checks that the store holds n jobs with Seq 1..n, each once.
func checkAllCreated(t *testing.T, s *Store, n int) {
	t.Helper()
	all, err := s.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[uint64]string{}
	for _, j := range all {
		if other, dup := seqs[j.Seq]; dup {
			t.Errorf("Seq %d given to %s and %s", j.Seq, other, j.ID)
		}
		seqs[j.Seq] = j.ID
	}
	if len(all) != n || len(seqs) != n || seqs[1] == "" || seqs[uint64(n)] == "" {
		t.Errorf("%d jobs with %d distinct Seqs, want %d with Seq 1..%d", len(all), len(seqs), n, n)
	}
}

func TestConcurrentUpdatesOfOneJob(t *testing.T) {
	const writers = 50
	s := openTemp(t)
	mustCreate(t, s, testJob("a").obj())
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			if _, err := s.Update("a", func(j *Job) error { j.Priority++; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := s.Get("a")
	if err != nil {
		t.Fatal(err)
	}
	want := testJob("a").priority(writers).stored(1, writers+1).obj()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("job after %d concurrent increments (-want +got):\n%s", writers, diff)
	}
}
