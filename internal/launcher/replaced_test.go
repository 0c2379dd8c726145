package launcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/rundir"
)

// The run folder renamed away and another put in its place while attempt 1 runs: the
// next attempt does not start, the run fails saying so, and the record (in the folder
// the run opened) says why. The workers get the folder's ID for the helper's checks.
func TestRunFailsWhenTheFolderIsReplaced(t *testing.T) {
	job := makeJob(t, `echo "id=$TRAINYARD_RUN_DIR_ID"; exit 1`).restarts(2).obj(t)
	h := newHarness(t, job)
	dir := h.l.Folder.Dir
	var attempts []int
	h.l.AttemptEnv = func(n int) (map[string]string, error) {
		attempts = append(attempts, n)
		if n == 1 { // swap while attempt 1 is about to run
			if err := os.Rename(dir, dir+".moved"); err != nil {
				return nil, err
			}
			return nil, os.Mkdir(dir, 0o700)
		}
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := h.l.Run(ctx)
	h.console.Close()
	if !errors.Is(err, rundir.ErrReplaced) || !strings.Contains(err.Error(), "attempt 2: run folder "+dir+" was replaced") {
		t.Fatalf("Run: %v, want ErrReplaced before attempt 2\n%s", err, h.out)
	}
	if len(attempts) != 1 {
		t.Errorf("attempts prepared: %v, want only attempt 1", attempts)
	}
	if want := "id=" + h.l.Folder.ID(); !strings.Contains(h.out.String(), want) {
		t.Errorf("the workers' output lacks %q:\n%s", want, h.out)
	}
	rec, err := rundir.ReadRecord(dir + ".moved")
	if err != nil || rec.Phase != "Failed" || !strings.Contains(rec.Reason, "was replaced") {
		t.Errorf("the run's record: phase %s, reason %q (%v); want Failed saying why", rec.Phase, rec.Reason, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the run wrote %d entries into the folder put in its place", len(entries))
	}
	if _, err := os.Stat(filepath.Join(dir+".moved", rundir.LogPath(1, 0))); err != nil {
		t.Errorf("attempt 1's log is not in the run's own folder: %v", err)
	}
}
