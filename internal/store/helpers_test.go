package store

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestMain runs the crash test's child when the parent asked for it (see crash_test.go),
// and the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(envCrashChild) == "1" {
		os.Exit(crashChild(os.Getenv(envCrashPath), os.Getenv(envCrashPrefix)))
	}
	os.Exit(m.Run())
}

// testSpec is a resolved TrainJob as the server stores it (about 700 bytes).
const testSpec = `{"apiVersion":"trainyard.dev/v1alpha1","kind":"TrainJob","metadata":{"name":"resnet-imagenet","labels":{"team":"vision"}},"spec":{"workers":2,"procsPerWorker":4,"resources":{"cpu":"16","memory":"64Gi","gpu":4},"command":["/usr/bin/python3","-u"],"args":["train.py","--epochs","90"],"env":[{"name":"NCCL_DEBUG","value":"INFO"},{"name":"EMPTY"}],"workingDir":"/srv/resnet","storagePath":"/data/runs","runName":"resnet-try-1","maxRestarts":3,"terminationGracePeriodSeconds":30,"hangTimeoutSeconds":600,"processGroupTimeoutSeconds":120,"checkpoints":{"keep":3,"scoreMetric":"accuracy","scoreOrder":"max"}},"status":{}}`

// submitted is the SubmittedAt of test jobs.
var submitted = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// jobWrapper builds test jobs: testJob("a").status(Running).obj().
type jobWrapper struct{ Job }

// testJob returns a pending job with the ID and testSpec.
func testJob(id string) *jobWrapper {
	return &jobWrapper{Job{
		ID:          id,
		Name:        "resnet-imagenet",
		Status:      Pending,
		Spec:        json.RawMessage(testSpec),
		SubmittedAt: submitted,
	}}
}

func (w *jobWrapper) status(st Status) *jobWrapper { w.Status = st; return w }
func (w *jobWrapper) priority(p int) *jobWrapper   { w.Priority = p; return w }

// stored sets what Create assigns.
func (w *jobWrapper) stored(seq, version uint64) *jobWrapper {
	w.Seq, w.Version = seq, version
	return w
}

// obj returns a copy of the built job.
func (w *jobWrapper) obj() *Job { j := w.Job; return &j }

// statePath returns a path for a state file in a new temporary folder, under a parent
// folder that does not exist yet.
func statePath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "server", "state.db")
}

// openTemp opens a new store that is closed when the test ends.
func openTemp(t testing.TB) *Store {
	t.Helper()
	return openAt(t, statePath(t))
}

// openAt opens the store at path; it is closed when the test ends.
func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, bolt.ErrDatabaseNotOpen) {
			t.Error(err)
		}
	})
	return s
}

// reopen closes s and opens its file again, as a restarted server would.
func reopen(t testing.TB, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openAt(t, s.Path())
}

// mustCreate creates the jobs in order.
func mustCreate(t testing.TB, s *Store, jobs ...*Job) {
	t.Helper()
	for _, j := range jobs {
		if err := s.Create(j); err != nil {
			t.Fatal(err)
		}
	}
}

// setStatus returns an Update change that sets the status.
func setStatus(st Status) func(*Job) error {
	return func(j *Job) error { j.Status = st; return nil }
}

// checkFile runs bbolt's consistency check (pages, freelist, branches) on the open file.
func checkFile(t testing.TB, s *Store) {
	t.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("state file check: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ids returns the jobs' IDs in order.
func ids(jobs []*Job) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// checkIndex checks that the status index names every job once, under its status and Seq.
func checkIndex(t testing.TB, s *Store) {
	t.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		indexed := 0
		for _, st := range statuses() {
			indexed += statusBucket(tx, st).Stats().KeyN
		}
		records := 0
		err := tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			records++
			j, err := decodeRecord(string(k), v)
			if err != nil {
				return err
			}
			if got := string(statusBucket(tx, j.Status).Get(seqKey(j.Seq))); got != j.ID {
				t.Errorf("index of %s at Seq %d names %q, want %q", j.Status, j.Seq, got, j.ID)
			}
			return nil
		})
		if indexed != records {
			t.Errorf("index has %d entries for %d jobs", indexed, records)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
