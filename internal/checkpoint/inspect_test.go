package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A store from Inspect sees what another store commits, leaves .staging alone, and refuses
// every change.
func TestInspectReadsOnly(t *testing.T) {
	s := openStore(t)
	for i := 1; i <= 3; i++ {
		if _, err := s.Commit(writeCheckpoint(t, t.TempDir(), i), Meta{Iteration: i, Attempt: min(i, 2), Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	leftover := filepath.Join(s.Dir(), StagingDir, "checkpoint_000004.abc")
	if err := os.Mkdir(leftover, 0o755); err != nil {
		t.Fatal(err)
	}

	r, err := Inspect(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"checkpoint_000001", "checkpoint_000002", "checkpoint_000003"}, listNames(t, r)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	latest, skipped, err := r.Latest()
	if err != nil || len(skipped) != 0 || latest.Name != "checkpoint_000003" {
		t.Errorf("Latest = %s, %v, %v; want checkpoint_000003", latest.Name, skipped, err)
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Errorf("Inspect touched .staging: %v", err)
	}

	src := writeCheckpoint(t, t.TempDir(), 4)
	if _, err := r.Commit(src, Meta{Iteration: 4}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Commit on an inspected store: %v, want ErrReadOnly", err)
	}
	if _, err := os.Stat(filepath.Join(src, "model.pt")); err != nil {
		t.Errorf("a refused Commit moved the source's files: %v", err)
	}
	if _, err := r.CommitTaken(&Taken{Src: src, Dir: src}, Meta{}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("CommitTaken on an inspected store: %v, want ErrReadOnly", err)
	}
	if _, err := r.Retain(Policy{Keep: 1}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Retain on an inspected store: %v, want ErrReadOnly", err)
	}
	if _, err := Inspect(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Inspect of a folder that does not exist succeeded")
	}
}

// LatestBefore ignores the checkpoints of the attempt and later ones, even damaged ones.
func TestLatestBefore(t *testing.T) {
	s := openStore(t)
	for i, attempt := range []int{1, 1, 2, 3} {
		if _, err := s.Commit(writeCheckpoint(t, t.TempDir(), i), Meta{Iteration: i + 1, Attempt: attempt, Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	damage := filepath.Join(s.Dir(), "checkpoint_000004", "model.pt")
	if err := os.Chmod(damage, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damage, []byte("cut"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[int]string{1: "", 2: "checkpoint_000002", 3: "checkpoint_000003", 4: "checkpoint_000003"}
	for attempt, want := range cases {
		got, _, err := s.LatestBefore(attempt)
		if got.Name != want || (want == "") != errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("LatestBefore(%d) = %q, %v; want %q", attempt, got.Name, err, want)
		}
	}
}
