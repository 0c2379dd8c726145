package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLatestSkipsDamaged(t *testing.T) {
	cases := map[string]struct {
		damage func(t *testing.T, dir string)
		want   string // the error for checkpoint_000002
		listed bool   // whether List still shows it (its manifest is readable)
	}{
		"file grew": {
			damage: func(t *testing.T, dir string) { appendFile(t, filepath.Join(dir, "model.pt"), "x") },
			want:   "checkpoint_000002: model.pt: size 2001 bytes, manifest says 2000",
			listed: true,
		},
		"file truncated": {
			damage: func(t *testing.T, dir string) { must(t, os.Truncate(filepath.Join(dir, "optim", "state.pt"), 10)) },
			want:   "checkpoint_000002: optim/state.pt: size 10 bytes, manifest says 17",
			listed: true,
		},
		"content edited": {
			damage: func(t *testing.T, dir string) { writeAt(t, filepath.Join(dir, "model.pt"), "W") },
			want:   "checkpoint_000002: model.pt: CRC-32C ",
			listed: true,
		},
		"file deleted": {
			damage: func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, "rng", "rank-0", "state.bin"))) },
			want:   "checkpoint_000002: rng/rank-0/state.bin: missing (the manifest lists 3000 bytes)",
			listed: true,
		},
		"extra file": {
			damage: func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"optim/extra.pt": "x"}) },
			want:   "checkpoint_000002: optim/extra.pt: not in the manifest (added after the commit)",
			listed: true,
		},
		"extra symlink": {
			damage: func(t *testing.T, dir string) { must(t, os.Symlink("model.pt", filepath.Join(dir, "link"))) },
			want:   "checkpoint_000002: link is a symbolic link, not in the manifest",
			listed: true,
		},
		"manifest corrupt": {
			damage: func(t *testing.T, dir string) { writeAt(t, filepath.Join(dir, ManifestName), "]") },
			want:   "checkpoint_000002: manifest .trainyard-manifest.json: invalid character",
		},
		"manifest missing": {
			damage: func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, ManifestName))) },
			want:   "checkpoint_000002: no manifest (.trainyard-manifest.json is missing)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t)
			parent := t.TempDir()
			commitSample(t, s, parent, 1)
			tc.damage(t, commitSample(t, s, parent, 2).Dir)
			latest, skipped, err := s.Latest()
			if err != nil || latest.Name != "checkpoint_000001" {
				t.Fatalf("Latest = %s, %v; want checkpoint_000001", latest.Name, err)
			}
			if len(skipped) != 1 || !strings.HasPrefix(skipped[0].Error(), tc.want) {
				t.Errorf("skipped = %v, want one error starting %q", skipped, tc.want)
			}
			want := []string{"checkpoint_000001"}
			if tc.listed {
				want = append(want, "checkpoint_000002")
			}
			if diff := cmp.Diff(want, listNames(t, s)); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

// appendFile appends text to the (read-only) file at path.
func appendFile(t *testing.T, path, text string) {
	t.Helper()
	must(t, os.Chmod(path, 0o644))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString(text)
	must(t, err)
	must(t, f.Close())
}

// writeAt overwrites the start of the (read-only) file at path with text.
func writeAt(t *testing.T, path, text string) {
	t.Helper()
	must(t, os.Chmod(path, 0o644))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte(text), 0)
	must(t, err)
	must(t, f.Close())
}

func TestLatestNone(t *testing.T) {
	s := openStore(t)
	if _, skipped, err := s.Latest(); !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 0 {
		t.Errorf("Latest of an empty run: %v, %v; want ErrNoCheckpoint", skipped, err)
	}
	info := commitSample(t, s, t.TempDir(), 1)
	must(t, os.Remove(filepath.Join(info.Dir, "model.pt")))
	_, skipped, err := s.Latest()
	if !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 1 {
		t.Errorf("Latest with only a damaged checkpoint: %v, %v; want ErrNoCheckpoint and 1 skipped", skipped, err)
	}
}

func TestVerifyRejectsBadManifestPaths(t *testing.T) {
	s := openStore(t)
	info := commitSample(t, s, t.TempDir(), 1)
	p := filepath.Join(info.Dir, ManifestName)
	data, err := os.ReadFile(p)
	must(t, err)
	must(t, os.Chmod(p, 0o644))
	must(t, os.WriteFile(p, []byte(strings.Replace(string(data), `"model.pt"`, `"../../run.json"`, 1)), 0o644))
	_, err = Verify(info.Dir)
	if want := `checkpoint_000001: manifest .trainyard-manifest.json lists an invalid path "../../run.json"`; err == nil || err.Error() != want {
		t.Errorf("Verify: %v, want %s", err, want)
	}
}
