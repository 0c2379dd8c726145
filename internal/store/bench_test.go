package store

import (
	"fmt"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// seed creates finished terminal jobs and pending pending jobs, interleaved in Seq order
// (every eleventh job pending, as with 10,000 finished and 1,000 queued), in transactions
// of 1,000 jobs through the same code as Create.
func seed(tb testing.TB, s *Store, finished, pending int) {
	tb.Helper()
	total := finished + pending
	every := total / max(pending, 1)
	for start := 0; start < total; start += 1000 {
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i := start; i < min(start+1000, total); i++ {
				j := testJob(submissionID(i)).stored(0, 1).obj()
				if i%every != every-1 || pending == 0 {
					j.Status = []Status{Succeeded, Failed, Stopped}[i%3]
				}
				if err := create(tx, j); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// submissionID returns a Ray-style submission ID for the i-th job: random-looking, so that
// jobs are inserted all over the ID-keyed bucket, as a server's are.
func submissionID(i int) string {
	return fmt.Sprintf("raysubmit_%016x", uint64(i+1)*0x9e3779b97f4a7c15)
}

func TestListPendingAmongMany(t *testing.T) {
	s := openTemp(t)
	seed(t, s, 10_000, 1_000)
	got, err := s.List(Filter{Statuses: []Status{Pending}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1_000 || got[0].Seq != 11 || got[999].Seq != 11_000 {
		t.Errorf("List(Pending): %d jobs, want 1000 with Seq 11, 22, ..., 11000", len(got))
	}
	counts, err := s.Counts()
	if err != nil {
		t.Fatal(err)
	}
	if counts[Pending] != 1_000 || counts[Succeeded]+counts[Failed]+counts[Stopped] != 10_000 {
		t.Errorf("Counts = %v", counts)
	}
	checkFile(t, s)
	checkIndex(t, s)
}

// BenchmarkListPending lists the 1,000 pending jobs of a store that also holds 10,000
// finished ones. It reports the state file's size (file-bytes) and the part bbolt uses
// (used-bytes).
func BenchmarkListPending(b *testing.B) {
	s := openTemp(b)
	seed(b, s, 10_000, 1_000)
	file, used := fileSizes(b, s)
	b.ReportAllocs()
	for b.Loop() {
		jobs, err := s.List(Filter{Statuses: []Status{Pending}})
		if err != nil || len(jobs) != 1_000 {
			b.Fatalf("List(Pending): %d jobs, %v", len(jobs), err)
		}
	}
	b.ReportMetric(float64(file), "file-bytes")
	b.ReportMetric(float64(used), "used-bytes")
}

// fileSizes returns the state file's size, and the part of it that bbolt uses (the rest is
// space it allocated ahead, 16 MiB at a time past 16 MiB).
func fileSizes(tb testing.TB, s *Store) (file, used int64) {
	info, err := os.Stat(s.Path())
	if err != nil {
		tb.Fatal(err)
	}
	err = s.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	if err != nil {
		tb.Fatal(err)
	}
	return info.Size(), used
}

// BenchmarkCounts reads the per-status counts of the same 11,000 jobs.
func BenchmarkCounts(b *testing.B) {
	s := openTemp(b)
	seed(b, s, 10_000, 1_000)
	for b.Loop() {
		if _, err := s.Counts(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreate creates jobs one by one, each committed and fsynced.
func BenchmarkCreate(b *testing.B) {
	s := openTemp(b)
	i := 0
	for b.Loop() {
		if err := s.Create(testJob(submissionID(i)).obj()); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkUpdate changes the status of one job back and forth, each change committed.
func BenchmarkUpdate(b *testing.B) {
	s := openTemp(b)
	mustCreate(b, s, testJob("a").obj())
	sts := []Status{Running, Pending}
	i := 0
	for b.Loop() {
		if _, err := s.Update("a", setStatus(sts[i%2])); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
