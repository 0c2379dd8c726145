package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var errInjected = errors.New("injected failure")

// crash is what a hook panics with to stop a commit as a killed process would: no error
// handling and no cleanup runs.
type crash struct{}

// failAt returns a hook that fails (or crashes) at step and records the steps it saw.
func failAt(step string, panics bool, seen *[]string) func(string) error {
	return func(s string) error {
		*seen = append(*seen, s)
		if s != step {
			return nil
		}
		if panics {
			panic(crash{})
		}
		return errInjected
	}
}

// commitCrashing runs Commit and turns a crash{} panic into crashed.
func commitCrashing(s *Store, src string) (info Info, err error, crashed bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			crashed = true
		}
	}()
	info, err = s.Commit(src, Meta{Iteration: 2})
	return info, err, false
}

// published reports whether the commit is visible after step.
func published(step string) bool {
	return slices.Index(steps, step) >= slices.Index(steps, "published")
}

func TestFailureAtEveryStep(t *testing.T) {
	for _, path := range paths {
		for _, step := range append(slices.Clone(steps), "copy model.pt") {
			if path == "rename" && (step == "cleaned" || step == "copy model.pt") {
				continue // steps of the copy path only
			}
			for _, panics := range []bool{false, true} {
				mode := map[bool]string{false: "error", true: "crash"}[panics]
				t.Run(path+"/"+step+"/"+mode, func(t *testing.T) {
					testFailureAt(t, path, step, panics)
				})
			}
		}
	}
}

func testFailureAt(t *testing.T, path, step string, panics bool) {
	s := openStore(t)
	parent := scratch(t, s, path)
	commitSample(t, s, parent, 1)
	var seen []string
	s.testHook = failAt(step, panics, &seen)
	src := writeCheckpoint(t, parent, 2)
	_, err, crashed := commitCrashing(s, src)
	if !slices.Contains(seen, step) || crashed != panics {
		t.Fatalf("step %s never came (steps: %v; error %v, crashed %v)", step, seen, err, crashed)
	}
	visible := published(step)
	if !panics {
		checkFailedCommit(t, s, src, err, step, visible)
	}
	s = reopen(t, s) // a restarted process
	want := []string{"checkpoint_000001"}
	if visible {
		want = append(want, "checkpoint_000002")
	}
	if diff := cmp.Diff(want, listNames(t, s)); diff != "" {
		t.Errorf("List after a failure at %s (-want +got):\n%s", step, diff)
	}
	latest, skipped, err := s.Latest()
	if err != nil || len(skipped) > 0 || latest.Name != want[len(want)-1] {
		t.Errorf("Latest = %s, %v, %v; want %s", latest.Name, skipped, err, want[len(want)-1])
	}
	if got := stagingEntries(t, s); len(got) != 0 {
		t.Errorf("Open left %v in .staging", got)
	}
	if info := commitSample(t, s, parent, 3); info.Index <= len(want) {
		t.Errorf("next commit got index %d, want more than %d", info.Index, len(want))
	}
}

// checkFailedCommit checks what a commit that returned err left: nothing visible and the
// files kept in the taken folder that the error names, or, after publishing, a committed
// checkpoint.
func checkFailedCommit(t *testing.T, s *Store, src string, err error, step string, visible bool) {
	t.Helper()
	if visible {
		if err != nil {
			t.Errorf("a failure after publishing failed the commit: %v", err)
		}
		return
	}
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), step) {
		t.Fatalf("commit failing at %s: %v", step, err)
	}
	if step == "taken" {
		// Take put the files back.
		if diff := cmp.Diff(sampleFiles(2), readTree(t, src)); diff != "" {
			t.Errorf("src after a failed Take (-want +got):\n%s", diff)
		}
		return
	}
	if !strings.HasPrefix(err.Error(), "commit checkpoint_000002: ") {
		t.Errorf("error %q does not start with the checkpoint's name", err)
	}
	kept := siblings(t, filepath.Dir(src))
	if len(kept) != 1 || !strings.Contains(err.Error(), "files are kept in "+kept[0]) {
		t.Fatalf("error %q should name the one folder that keeps the files (found %v)", err, kept)
	}
	if diff := cmp.Diff(sampleFiles(2), readTree(t, kept[0])); diff != "" {
		t.Errorf("files kept after the failure (-want +got):\n%s", diff)
	}
	if got := stagingEntries(t, s); len(got) != 0 {
		t.Errorf("a failed commit left %v in .staging", got)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "checkpoint_000002")); err == nil {
		t.Error("a failed commit left checkpoint_000002")
	}
}

func TestCopySourceChanges(t *testing.T) {
	cases := map[string]struct {
		change func(t *testing.T, taken *Taken)
		want   string
	}{
		"file grows": {
			change: func(t *testing.T, taken *Taken) {
				f, err := os.OpenFile(filepath.Join(taken.Dir, "model.pt"), os.O_APPEND|os.O_WRONLY, 0)
				must(t, err)
				_, err = f.WriteString("more")
				must(t, err)
				must(t, f.Close())
			},
			want: "model.pt changed size during the copy (2000 bytes when it began, 2004 read, 2004 after)",
		},
		"file shrinks": {
			change: func(t *testing.T, taken *Taken) {
				must(t, os.Truncate(filepath.Join(taken.Dir, "model.pt"), 10))
			},
			want: "model.pt changed size during the copy (2000 bytes when it began, 10 read, 10 after)",
		},
		"folder vanishes": {
			change: func(t *testing.T, taken *Taken) { must(t, os.RemoveAll(taken.Dir)) },
			want:   "model.pt vanished during the copy",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			parent := scratch(t, s, "copy")
			commitSample(t, s, parent, 1)
			taken, err := s.Take(writeCheckpoint(t, parent, 2))
			must(t, err)
			s.testHook = func(step string) error {
				if step == "copy model.pt" {
					tc.change(t, taken)
				}
				return nil
			}
			_, err = s.CommitTaken(taken, Meta{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("commit: %v; want an error containing %q", err, tc.want)
			}
			if diff := cmp.Diff([]string{"checkpoint_000001"}, listNames(t, s)); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
			if got := stagingEntries(t, s); len(got) != 0 {
				t.Errorf("the failed copy left %v in .staging", got)
			}
		})
	}
}
