package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

func testJob(t *testing.T) *v1.TrainJob {
	t.Helper()
	return &v1.TrainJob{Spec: v1.TrainJobSpec{StoragePath: filepath.Join(t.TempDir(), "results"),
		RunName: "mnist", Command: []string{"python3", "train.py"}}}
}

func TestOpenNewRun(t *testing.T) {
	job := testJob(t)
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if want := filepath.Join(job.Spec.StoragePath, "mnist"); r.Dir != want {
		t.Errorf("Dir = %s, want %s", r.Dir, want)
	}
	spec, err := os.ReadFile(filepath.Join(r.Dir, SpecFile))
	if err != nil || !strings.Contains(string(spec), "train.py") {
		t.Errorf("job.yaml = %q (%v), want the resolved job", spec, err)
	}
	if rec := r.Record(); rec.Phase != v1.PhasePending || rec.Name != "mnist" {
		t.Errorf("record = %+v, want a pending run named mnist", rec)
	}
}

func TestOpenRefusesSucceededRun(t *testing.T) {
	job := testJob(t)
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Update(func(rec *Record) { rec.Phase = v1.PhaseSucceeded }); err != nil {
		t.Fatal(err)
	}
	r.Close()
	before, _ := os.ReadFile(filepath.Join(r.Dir, RecordFile))
	_, err = Open(job, Options{})
	if !errors.Is(err, ErrFinished) || !strings.Contains(err.Error(), "pick another --name, give --fresh to start it over") {
		t.Fatalf("Open of a succeeded run: %v, want ErrFinished with advice", err)
	}
	if after, _ := os.ReadFile(filepath.Join(r.Dir, RecordFile)); string(after) != string(before) {
		t.Error("refusing the run changed its record")
	}
	r, err = Open(job, Options{Rerun: true})
	if err != nil {
		t.Fatalf("Open with Rerun of a succeeded run: %v", err)
	}
	r.Close()
}

func TestOpenContinuesFailedRun(t *testing.T) {
	job := testJob(t)
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Update(func(rec *Record) {
		rec.Phase = v1.PhaseFailed
		rec.Attempts = append(rec.Attempts, Attempt{Number: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	r, err = Open(job, Options{})
	if err != nil {
		t.Fatalf("Open of a failed run: %v", err)
	}
	defer r.Close()
	if n := len(r.Record().Attempts); n != 1 {
		t.Errorf("continued run has %d attempts, want the earlier 1", n)
	}
}

func TestOpenRefusesBusyRun(t *testing.T) {
	job := testJob(t)
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := Open(job, Options{}); !errors.Is(err, ErrBusy) {
		t.Errorf("second Open while the first holds the run: %v, want ErrBusy", err)
	}
	if _, err := os.Stat(r.Dir); err != nil {
		t.Errorf("refusing a busy run removed its folder: %v", err)
	}
}

func TestOpenFailureLeavesNothing(t *testing.T) {
	job := testJob(t)
	dir := filepath.Join(job.Spec.StoragePath, job.Spec.RunName)
	if err := os.MkdirAll(filepath.Join(dir, RecordFile), 0o755); err != nil { // run.json is a folder: unreadable
		t.Fatal(err)
	}
	if _, err := Open(job, Options{}); err == nil {
		t.Fatal("Open succeeded on a broken record")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("Open removed a folder it did not create: %v", err)
	}

	job = testJob(t)
	job.Spec.RunName = "bad"
	job.Spec.Command = nil
	if err := os.MkdirAll(job.Spec.StoragePath, 0o755); err != nil {
		t.Fatal(err)
	}
	// A record that is not JSON makes Open fail after it created nothing new.
	d := filepath.Join(job.Spec.StoragePath, "bad")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, RecordFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(job, Options{}); err == nil || !strings.Contains(err.Error(), "read run record") {
		t.Errorf("Open with a corrupt record: %v", err)
	}
}

func TestUpdateIsAtomic(t *testing.T) {
	job := testJob(t)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	r, err := Open(job, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 20 {
		if err := r.Update(func(rec *Record) { rec.Attempts = append(rec.Attempts, Attempt{Number: i + 1}) }); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
	if rec := r.Record(); len(rec.Attempts) != 20 || !rec.Updated.Equal(now) {
		t.Errorf("record: %d attempts, updated %s", len(rec.Attempts), rec.Updated)
	}
}

func TestCreateLog(t *testing.T) {
	r, err := Open(testJob(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := r.CreateLog(2, 5)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if want := filepath.Join(r.Dir, "logs", "attempt-2", "rank-5.log"); f.Name() != want {
		t.Errorf("log at %s, want %s", f.Name(), want)
	}
}

func TestOpenSecondaryWritesNothing(t *testing.T) {
	job := testJob(t)
	if _, err := Open(job, Options{Secondary: true}); err == nil {
		t.Error("secondary Open of a folder that does not exist succeeded")
	}
	primary, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	if err := primary.Update(func(rec *Record) {
		rec.Phase = v1.PhaseSucceeded
		rec.Attempts = append(rec.Attempts, Attempt{Number: 1})
	}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(primary.Dir, RecordFile))

	sec, err := Open(job, Options{Secondary: true})
	if err != nil {
		t.Fatalf("secondary Open while the primary holds the lock (of a succeeded run): %v", err)
	}
	defer sec.Close()
	if got := sec.Record(); got.Phase != v1.PhaseSucceeded || len(got.Attempts) != 1 {
		t.Errorf("secondary record = %+v, want the primary's", got)
	}
	if err := sec.Update(func(rec *Record) { rec.Attempts = append(rec.Attempts, Attempt{Number: 2}) }); err != nil {
		t.Fatal(err)
	}
	if n := len(sec.Record().Attempts); n != 2 {
		t.Errorf("secondary record after Update has %d attempts, want 2 (in memory)", n)
	}
	if after, _ := os.ReadFile(filepath.Join(primary.Dir, RecordFile)); string(after) != string(before) {
		t.Errorf("secondary Update wrote run.json:\n%s", after)
	}
	f, err := sec.CreateLog(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := sec.Close(); err != nil {
		t.Errorf("secondary Close: %v", err)
	}
	if _, err := Open(job, Options{Rerun: true}); !errors.Is(err, ErrBusy) {
		t.Errorf("primary Open while the first primary holds the run: %v, want ErrBusy (the secondary's Close released nothing)", err)
	}
}
