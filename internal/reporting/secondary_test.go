package reporting

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// treeOf lists the paths under dir, with sizes, so a test can tell that nothing changed.
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel+" "+fi.Mode().String()+" "+strings.Repeat("+", int(min(fi.Size(), 64))))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// A secondary session answers its ranks and tells them worker 0's checkpoint, but changes
// nothing in the run folder, even while worker 0 goes on committing.
func TestSecondarySession(t *testing.T) {
	dir, job := newRunDir(t)
	primary, _ := startSession(t, job, dir)
	attemptEnv(t, primary, 1)
	mustReport(t, primary, Report{Rank: 0, Metrics: map[string]float64{"loss": 1}, Checkpoint: newCheckpointDir(t, dir, "a", "v1")})
	mustReport(t, primary, Report{Rank: 0, Metrics: map[string]float64{"loss": 0.5}})
	closeSession(t, primary)
	stale := filepath.Join(dir, ScratchDir, "rank-1", "checkpoint-old")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}

	primary, _ = startSession(t, job, dir)
	attemptEnv(t, primary, 2)
	// worker 0's rank 0 reports, with a checkpoint, before worker 1 has begun.
	mustReport(t, primary, Report{Rank: 0, Metrics: map[string]float64{"loss": 0.25}, Checkpoint: newCheckpointDir(t, dir, "b", "v2")})
	closeSession(t, primary) // its TensorBoard events are written now, not in a second
	before := treeOf(t, dir)

	n := &notes{}
	sec, err := StartWith(job, rootOf(t, dir), n, nil, Options{Secondary: true, Ranks: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	env := attemptEnv(t, sec, 2)
	if want := filepath.Join(dir, "checkpoint_000001"); env["TRAINYARD_CHECKPOINT"] != want {
		t.Errorf("TRAINYARD_CHECKPOINT = %q, want %s: attempt 2 resumes from attempt 1's last", env["TRAINYARD_CHECKPOINT"], want)
	}
	c := dial(t, env["TRAINYARD_REPORT_SOCKET"])
	for _, tc := range []struct{ line, want string }{
		{`{"op": "report", "rank": 1, "metrics": {"loss": 0.3}, "checkpoint": null}`, `{"checkpoint":null,"iteration":3,"ok":true}`},
		{`{"op": "report", "rank": 1, "metrics": {"loss": 0.2}, "checkpoint": null}`, `{"checkpoint":null,"iteration":4,"ok":true}`},
		{`{"op": "report", "rank": 0, "metrics": {"loss": 0.2}, "checkpoint": null}`,
			`{"error":"rank 0 reports to worker 0's trainyard; this one serves other ranks only","ok":false}`},
	} {
		if got, err := c.roundTrip(tc.line); err != nil || got != tc.want {
			t.Errorf("reply to %s: %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	closeSession(t, sec)
	if diff := cmp.Diff(before, treeOf(t, dir)); diff != "" {
		t.Errorf("the secondary changed the run folder (-before +after):\n%s", diff)
	}
	if want := []string{"attempt 2: resuming from checkpoint_000001 (iteration 1, saved in attempt 1)"}; !slices.Equal(n.take(), want) {
		t.Errorf("notices: want %q", want)
	}
}

// With Ranks, a session cleans only those ranks' scratch folders.
func TestSessionCleansOnlyItsRanks(t *testing.T) {
	dir, job := newRunDir(t)
	mine := filepath.Join(dir, ScratchDir, "rank-0", "left-over")
	theirs := filepath.Join(dir, ScratchDir, "rank-1", "in-use")
	for _, d := range []string{mine, theirs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := StartWith(job, rootOf(t, dir), nil, nil, Options{Ranks: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	attemptEnv(t, s, 1)
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("rank 0's left-over folder: %v, want removed", err)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("rank 1's folder: %v, want kept", err)
	}
}
