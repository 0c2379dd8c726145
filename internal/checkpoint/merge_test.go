package checkpoint

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Every rank's folder is merged into one checkpoint (Ray's distributed checkpoints); where
// two hold the same file, the first folder's (the lowest rank's) is kept.
func TestSubmitMergedMergesFolders(t *testing.T) {
	cases := map[string]struct {
		firstParent func(t *testing.T) string // where rank 0's folder is
	}{
		"on the run's filesystem (moved)": {firstParent: func(t *testing.T) string { return t.TempDir() }},
		"first folder on another filesystem (copied)": {firstParent: func(t *testing.T) string {
			dir, err := os.MkdirTemp("/dev/shm", "merge-")
			if err != nil {
				t.Skip("no /dev/shm here:", err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if sameDevice(t, dir, os.TempDir()) {
				t.Skip("/dev/shm is on the same filesystem as the run folder here")
			}
			return dir
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			c := NewCommitter(s, Policy{}, testLogger(t))
			var got []Collision
			c.OnCollision(func(_ string, cs []Collision) { got = cs })
			shards := map[int]map[string]string{
				0: {"model.pt": "rank 0's", "shard-0.pt": "zero"},
				1: {"model.pt": "rank 1's", "shard-1.pt": "one", "optim/rank-1.pt": "state 1"},
				2: {},
			}
			var taken []*Taken
			for r := range 3 {
				parent := t.TempDir()
				if r == 0 {
					parent = tc.firstParent(t)
				}
				dir := filepath.Join(parent, "ckpt")
				writeFiles(t, dir, shards[r])
				tk, err := s.Take(dir)
				if err != nil {
					t.Fatal(err)
				}
				taken = append(taken, tk)
			}
			name, index := c.Reserve()
			if err := c.SubmitMerged(index, taken, Meta{Iteration: 4}); err != nil {
				t.Fatal(err)
			}
			if err := c.Wait(); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"model.pt": "rank 0's", "shard-0.pt": "zero", "shard-1.pt": "one", "optim/rank-1.pt": "state 1"}
			dir := filepath.Join(s.Dir(), name)
			files := readTree(t, dir)
			delete(files, ManifestName)
			if d := cmp.Diff(want, files); d != "" {
				t.Errorf("checkpoint files (-want +got):\n%s", d)
			}
			m, err := Verify(dir)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if d := cmp.Diff(manifestFiles(want), m.Files); d != "" {
				t.Errorf("manifest (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]Collision{{Path: "model.pt", Dropped: 1}}, got); d != "" {
				t.Errorf("collisions (-want +got):\n%s", d)
			}
			for _, tk := range taken {
				if _, err := os.Lstat(tk.Dir); !os.IsNotExist(err) {
					t.Errorf("taken folder %s is still there (%v)", tk.Dir, err)
				}
			}
		})
	}
}

// A folder that will not be committed is removed with its files.
func TestDiscard(t *testing.T) {
	s := openStore(t)
	tk, err := s.Take(writeCheckpoint(t, t.TempDir(), 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(tk); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tk.Dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", tk.Dir, err)
	}
}

func sameDevice(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb syscall.Stat_t
	if syscall.Stat(a, &sa) != nil || syscall.Stat(b, &sb) != nil {
		return true
	}
	return sa.Dev == sb.Dev
}
