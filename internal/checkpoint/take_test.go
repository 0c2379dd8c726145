package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTakeRefuses(t *testing.T) {
	cases := map[string]struct {
		make func(t *testing.T, s *Store, parent string) string // returns src
		want []string                                           // substrings of the error
	}{
		"missing": {
			make: func(t *testing.T, s *Store, parent string) string { return filepath.Join(parent, "nope") },
			want: []string{"nope does not exist"},
		},
		"a file": {
			make: func(t *testing.T, s *Store, parent string) string {
				writeFiles(t, parent, map[string]string{"model.pt": "x"})
				return filepath.Join(parent, "model.pt")
			},
			want: []string{"model.pt is a file; pass the folder that holds it (" + "PARENT" + ")"},
		},
		"a symlink inside": {
			make: func(t *testing.T, s *Store, parent string) string {
				src := writeCheckpoint(t, parent, 1)
				must(t, os.Symlink("/etc/passwd", filepath.Join(src, "optim", "link.pt")))
				return src
			},
			want: []string{"optim/link.pt is a symbolic link; a checkpoint may hold only regular files and folders"},
		},
		"a named pipe inside": {
			make: func(t *testing.T, s *Store, parent string) string {
				src := writeCheckpoint(t, parent, 1)
				must(t, syscall.Mkfifo(filepath.Join(src, "pipe"), 0o644))
				return src
			},
			want: []string{"pipe is a named pipe"},
		},
		"a symlink to a folder": {
			make: func(t *testing.T, s *Store, parent string) string {
				src := writeCheckpoint(t, parent, 1)
				must(t, os.Symlink(src, filepath.Join(parent, "link")))
				return filepath.Join(parent, "link")
			},
			want: []string{"link is a symbolic link; pass the folder it points to"},
		},
		"inside a committed checkpoint": {
			make: func(t *testing.T, s *Store, parent string) string {
				return filepath.Join(commitSample(t, s, parent, 1).Dir, "optim")
			},
			want: []string{"checkpoint_000001, which trainyard manages"},
		},
		"a committed checkpoint": {
			make: func(t *testing.T, s *Store, parent string) string { return commitSample(t, s, parent, 1).Dir },
			want: []string{"checkpoint_000001, which trainyard manages"},
		},
		"inside .staging": {
			make: func(t *testing.T, s *Store, parent string) string {
				return writeCheckpoint(t, filepath.Join(s.Dir(), StagingDir), 1)
			},
			want: []string{StagingDir + ", which trainyard manages"},
		},
		"the run folder": {
			make: func(t *testing.T, s *Store, parent string) string { return s.Dir() },
			want: []string{"is the run folder"},
		},
		"a parent of the run folder": {
			make: func(t *testing.T, s *Store, parent string) string { return filepath.Dir(s.Dir()) },
			want: []string{"holds the run folder"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			parent := t.TempDir()
			src := tc.make(t, s, parent)
			before := snapshot(t, filepath.Dir(s.Dir()), parent)
			_, err := s.Take(src)
			if err == nil {
				t.Fatalf("Take(%s) succeeded", src)
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "PARENT", parent); !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if diff := cmp.Diff(before, snapshot(t, filepath.Dir(s.Dir()), parent)); diff != "" {
				t.Errorf("a refused Take changed files (-want +got):\n%s", diff)
			}
		})
	}
}

// snapshot returns the names of everything under the folders.
func snapshot(t *testing.T, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, d := range dirs {
		err := filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
			out = append(out, p)
			return err
		})
		must(t, err)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestTakeMovesFilesAside(t *testing.T) {
	s := openStore(t)
	parent := t.TempDir()
	src := writeCheckpoint(t, parent, 1)
	must(t, os.Chmod(src, 0o701))
	taken, err := s.Take(src)
	if err != nil {
		t.Fatal(err)
	}
	checkSourceEmptied(t, src, 0o701)
	if want := filepath.Join(parent, "."+filepath.Base(src)+".trainyard-"); !strings.HasPrefix(taken.Dir, want) {
		t.Errorf("taken folder %s, want %s<random>", taken.Dir, want)
	}
	if diff := cmp.Diff(sampleFiles(1), readTree(t, taken.Dir)); diff != "" {
		t.Errorf("taken files (-want +got):\n%s", diff)
	}
	// The training process can write its next checkpoint into src at once.
	writeFiles(t, src, sampleFiles(2))
	info, err := s.CommitTaken(taken, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(manifestFiles(sampleFiles(1)), info.Manifest.Files); diff != "" {
		t.Errorf("committed files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sampleFiles(2), readTree(t, src)); diff != "" {
		t.Errorf("the next checkpoint in src (-want +got):\n%s", diff)
	}
}
