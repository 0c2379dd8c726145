package rundir

import (
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// A run's time is its attempts' time: not the wait between a stop and its continuation;
// an attempt whose launcher died ends at the record's last update, a running one now.
func TestRunningTimeAndRestarts(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ptr := func(s int) *time.Time { v := at(s); return &v }
	rec := Record{Phase: v1.PhaseInterrupted, Updated: at(106), Attempts: []Attempt{
		{Started: at(0), Ended: ptr(6), Outcome: "interrupted"},
		{Started: at(100), Outcome: ""}, // its launcher was killed: no end recorded
	}}
	if got := rec.RunningTime(at(1000)); got != 12*time.Second {
		t.Errorf("interrupted run: %v, want 12s (6 s, then 6 s until its last update)", got)
	}
	rec.Phase = v1.PhaseRunning
	if got := rec.RunningTime(at(110)); got != 16*time.Second {
		t.Errorf("running run: %v, want 16s", got)
	}
	if got := rec.Restarts(); got != 0 {
		t.Errorf("restarts after an interruption: %d, want 0", got)
	}
	rec.Attempts[0].Outcome = "failed"
	if got := rec.Restarts(); got != 1 {
		t.Errorf("restarts after a failure: %d, want 1", got)
	}
}
