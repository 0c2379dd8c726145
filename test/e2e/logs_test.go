package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/logstream"
)

// foldScript prints a line every rank prints, then one of the rank's own, then the
// shared line again.
const foldScript = `echo same; echo "own $RANK"; echo again`

// consoleLines returns the lines of trainyard run's output that ranks printed, and
// each rank's lines as the console shows them (a folded line counting for every rank it
// names).
func consoleLines(out string) (lines []string, perRank map[int][]string) {
	perRank = map[int][]string{}
	for _, l := range strings.Split(out, "\n") {
		ranks, ok := logstream.LineRanks(l)
		if !ok {
			continue
		}
		lines = append(lines, l)
		_, text, _ := strings.Cut(l, "] ")
		text, _, _ = strings.Cut(text, " [repeated ")
		for _, r := range ranks {
			perRank[r] = append(perRank[r], text)
		}
	}
	return lines, perRank
}

// The console folds what several ranks print where it saves lines, keeping each rank's
// order; --fold-logs=false and RAY_DEDUP_LOGS=0 turn folding off; --ranks shows some
// ranks only; the rank logs keep every line.
func TestRunFoldsLogs(t *testing.T) {
	cases := map[string]struct {
		args      []string
		env       []string
		ranks     []int
		wantFold  bool
		wantLines int // lines of ranks on the console, when not folded
	}{
		"folded by default": {ranks: []int{0, 1, 2}, wantFold: true},
		"--fold-logs=false": {args: []string{"--fold-logs=false"}, ranks: []int{0, 1, 2}, wantLines: 9},
		"RAY_DEDUP_LOGS=0":  {env: []string{"RAY_DEDUP_LOGS=0"}, ranks: []int{0, 1, 2}, wantLines: 9},
		"the job's env":     {args: []string{"--env", "RAY_DEDUP_LOGS=0"}, ranks: []int{0, 1, 2}, wantLines: 9},
		"--ranks 0,2":       {args: []string{"--ranks", "0,2", "--fold-logs=false"}, ranks: []int{0, 2}, wantLines: 6},
		"--ranks 1, folded": {args: []string{"--ranks", "1"}, ranks: []int{1}, wantLines: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			storage := t.TempDir()
			args := append([]string{"run", "--storage-path", storage, "--name", "fold", "--workers", "3"}, tc.args...)
			code, out := run(t, t.TempDir(), tc.env, append(args, "--", "sh", "-c", foldScript)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			lines, perRank := consoleLines(out)
			for r := range 3 {
				want := []string{"same", "own " + string(rune('0'+r)), "again"}
				shown := false
				for _, k := range tc.ranks {
					shown = shown || k == r
				}
				if !shown {
					want = nil
				}
				if strings.Join(perRank[r], "|") != strings.Join(want, "|") {
					t.Errorf("rank %d's lines on the console: %q, want %q\n%s", r, perRank[r], want, out)
				}
				log, err := os.ReadFile(filepath.Join(storage, "fold", "logs", "attempt-1", "rank-"+string(rune('0'+r))+".log"))
				if err != nil || string(log) != "same\nown "+string(rune('0'+r))+"\nagain\n" {
					t.Errorf("rank %d's log: %q, %v; want its every line", r, log, err)
				}
			}
			folded := strings.Contains(out, "across workers]")
			switch {
			case tc.wantFold && (!folded || len(lines) >= 9):
				t.Errorf("nothing folded: %d lines\n%s", len(lines), out)
			case !tc.wantFold && (folded || len(lines) != tc.wantLines):
				t.Errorf("%d lines, folded %v; want %d, not folded\n%s", len(lines), folded, tc.wantLines, out)
			}
		})
	}
}

// trainyard run keeps every line of its console in the run folder (console.log), which
// trainyard logs RUN prints when no server has a job of that name; not found is exit 1.
func TestLogsOfALocalRun(t *testing.T) {
	storage := t.TempDir()
	code, out := run(t, t.TempDir(), nil, "run", "--storage-path", storage, "--name", "loc", "--workers", "3",
		"--ranks", "0", "--", "sh", "-c", foldScript)
	if code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	noServer := []string{"TRAINYARD_ADDRESS=http://127.0.0.1:1"}
	code, out = run(t, t.TempDir(), noServer, "logs", "--storage-path", storage, "loc")
	lines, perRank := consoleLines(out)
	if code != 0 || len(lines) != 9 || strings.Contains(out, "across workers]") || !strings.Contains(out, "trainyard: attempt 1: starting 3 worker(s)") {
		t.Errorf("logs of a local run: exit %d; want every rank's lines, unfolded, and trainyard's:\n%s", code, out)
	}
	for r := range 3 {
		if want := "same|own " + string(rune('0'+r)) + "|again"; strings.Join(perRank[r], "|") != want {
			t.Errorf("rank %d's lines in console.log: %q, want %q", r, perRank[r], want)
		}
	}
	code, out = run(t, t.TempDir(), noServer, "logs", "--storage-path", storage, "--ranks", "2", "loc")
	if _, perRank := consoleLines(out); code != 0 || len(perRank) != 1 || len(perRank[2]) != 3 {
		t.Errorf("logs --ranks 2: exit %d:\n%s", code, out)
	}
	code, out = run(t, t.TempDir(), noServer, "logs", "--storage-path", storage, "nope")
	if code != 1 || !strings.Contains(out, "no run nope in "+storage) {
		t.Errorf("logs of nothing: exit %d, want 1:\n%s", code, out)
	}
}
