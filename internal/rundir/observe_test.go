package rundir

import (
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// A run whose launcher holds its folder shows as recorded; once the launcher is gone
// without recording an end, readers see it interrupted, with the reason; a run of another
// machine (a pod's) is shown as recorded.
func TestObserve(t *testing.T) {
	job := testJob(t)
	r, err := Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Update(func(rec *Record) { rec.Phase, rec.Supervisor = v1.PhaseRunning, 4242 }); err != nil {
		t.Fatal(err)
	}
	rec, err := Observe(r.Dir)
	if err != nil || rec.Phase != v1.PhaseRunning {
		t.Fatalf("while the launcher holds it: %s %v; want Running", rec.Phase, err)
	}
	r.Close() // the launcher is gone (SIGKILL) with run.json saying Running
	rec, err = Observe(r.Dir)
	if err != nil || rec.Phase != v1.PhaseInterrupted || !strings.HasPrefix(rec.Reason, "its launcher (pid 4242) is gone without recording how the run ended") {
		t.Fatalf("after the launcher is gone: %s %q %v; want Interrupted with the reason", rec.Phase, rec.Reason, err)
	}
	if rec, _ := ReadRecord(r.Dir); rec.Phase != v1.PhaseRunning {
		t.Errorf("Observe changed run.json: %s", rec.Phase)
	}

	r, err = Open(job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Update(func(rec *Record) { rec.Host = "worker-0-pod" }); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if rec, _ := Observe(r.Dir); rec.Phase != v1.PhaseRunning {
		t.Errorf("a run of another machine: %s; want it as recorded", rec.Phase)
	}
}
