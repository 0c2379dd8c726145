package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// A run that succeeded is run again only as asked: --resume continues it from its last
// checkpoint, --fresh starts it over in a new folder and keeps the old one beside it,
// --rerun is --resume with a deprecation message; each says which happened.
func TestRunResumeOrFresh(t *testing.T) {
	storage := t.TempDir()
	dir := filepath.Join(storage, "fm")
	if code, out := reportJob(t, storage, "fm", nil, "--iterations", "2"); code != 0 {
		t.Fatalf("first run: exit %d:\n%s", code, out)
	}

	code, out := reportJob(t, storage, "fm", nil, "--iterations", "3")
	if code != 2 || !strings.Contains(out, "give --fresh to start it over (the old folder is kept), or --resume to continue it") {
		t.Errorf("again without a flag: exit %d, want 2 naming --fresh and --resume:\n%s", code, out)
	}

	code, out = reportJob(t, storage, "fm", []string{"--resume"}, "--iterations", "3")
	for _, want := range []string{"trainyard: continuing run fm from checkpoint_000002 in attempt 2", "resumed from checkpoint_000002 at iteration 3"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--resume: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}

	code, out = reportJob(t, storage, "fm", []string{"--rerun"}, "--iterations", "3")
	for _, want := range []string{"--rerun has been deprecated, it continues the run from its last checkpoint, as --resume does",
		"trainyard: continuing run fm from checkpoint_000003 in attempt 3"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--rerun: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}

	code, out = reportJob(t, storage, "fm", []string{"--fresh"}, "--iterations", "2")
	if code != 0 || !strings.Contains(out, "trainyard: starting run fm over; the old folder is kept at "+dir+".") ||
		strings.Contains(out, "resumed from") {
		t.Fatalf("--fresh: exit %d; want it started over, from no checkpoint:\n%s", code, out)
	}
	if rec := readRecord(t, dir); len(rec.Attempts) != 1 || rec.Phase != v1.PhaseSucceeded {
		t.Errorf("the new run: %d attempts, %s; want 1, Succeeded", len(rec.Attempts), rec.Phase)
	}
	aside, _ := filepath.Glob(dir + ".*")
	if len(aside) != 1 {
		t.Fatalf("old folders beside the run: %v, want one", aside)
	}
	if rec := readRecord(t, aside[0]); len(rec.Attempts) != 3 {
		t.Errorf("the old folder's record: %d attempts, want its 3", len(rec.Attempts))
	}
	if _, err := os.Stat(filepath.Join(aside[0], "checkpoint_000003")); err != nil {
		t.Errorf("the old folder lost its checkpoint: %v", err)
	}

	code, out = reportJob(t, storage, "fm", []string{"--fresh", "--resume"})
	if code != 2 || !strings.Contains(out, "give one of them") {
		t.Errorf("--fresh --resume: exit %d, want 2:\n%s", code, out)
	}
	code, out = reportJob(t, storage, "none", []string{"--resume"})
	if code != 2 || !strings.Contains(out, "--resume: no run none in "+storage+" to continue") {
		t.Errorf("--resume of no run: exit %d, want 2:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(storage, "none")); err == nil {
		t.Errorf("--resume of no run created its folder")
	}
	// --rerun, as it always did, also starts a run that does not exist yet (scripts and
	// older Ray drivers pass it for every run).
	if code, out := reportJob(t, storage, "new", []string{"--rerun"}, "--iterations", "1"); code != 0 {
		t.Errorf("--rerun of a new run: exit %d, want 0:\n%s", code, out)
	}
}
