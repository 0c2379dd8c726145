package checkpoint

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// otherUID owns what a test plants as another user.
const otherUID = 12345

// needRoot skips a test that chowns files to another user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
}

// forge writes into dir/name a checkpoint that verifies, as anyone who can write a
// manifest can make one: files and a manifest listing their sizes and CRC-32Cs.
func forge(t *testing.T, dir, name string, files map[string]string) string {
	t.Helper()
	ckpt := filepath.Join(dir, name)
	writeFiles(t, ckpt, files)
	m := Manifest{Version: ManifestVersion, Name: name, Index: 500, Meta: Meta{Iteration: 500}, Files: manifestFiles(files)}
	data, err := json.Marshal(m)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(ckpt, ManifestName), data, 0o644))
	return ckpt
}

// chownTree gives everything under dir to uid.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	must(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, uid, uid)
		}
		return err
	}))
}

var forged = map[string]string{"checkpoint.pt": "FORGED payload"}

// The run folder's path swapped for another folder, or for a link to one, holding a
// checkpoint that verifies: the store still reads and commits in the folder it opened.
func TestStoreKeepsTheFolderItOpened(t *testing.T) {
	for _, swap := range []string{"folder", "link"} {
		t.Run(swap, func(t *testing.T) {
			s := openStore(t)
			commitSample(t, s, t.TempDir(), 1)
			moved := s.Dir() + ".moved"
			must(t, os.Rename(s.Dir(), moved))
			planted := filepath.Join(t.TempDir(), "planted")
			must(t, os.Mkdir(planted, 0o777))
			forge(t, planted, "checkpoint_000500", forged)
			if swap == "folder" {
				must(t, os.Rename(planted, s.Dir()))
				planted = s.Dir()
			} else {
				must(t, os.Symlink(planted, s.Dir()))
			}

			latest, _, err := s.Latest()
			if err != nil || latest.Name != "checkpoint_000001" {
				t.Errorf("Latest after the swap: %s, %v; want checkpoint_000001 of the folder the store opened", latest.Name, err)
			}
			if got := listNames(t, s); len(got) != 1 || got[0] != "checkpoint_000001" {
				t.Errorf("List after the swap: %v, want [checkpoint_000001]", got)
			}
			info := commitSample(t, s, t.TempDir(), 2)
			if _, err := os.Stat(filepath.Join(moved, info.Name)); err != nil {
				t.Errorf("the commit after the swap is not in the folder the store opened: %v", err)
			}
			if entries, _ := os.ReadDir(planted); len(entries) != 1 {
				t.Errorf("the store wrote into the folder put in the run folder's place: %d entries", len(entries))
			}
			// A checkpoint handed over by the run folder's path is looked up in the
			// folder the store opened: one written into the planted folder is not taken.
			src := filepath.Join(s.Dir(), "scratch")
			writeFiles(t, filepath.Join(planted, "scratch"), sampleFiles(3))
			if _, err := s.Take(src); err == nil || !strings.Contains(err.Error(), "does not exist") {
				t.Errorf("Take of %s after the swap: %v, want that it does not exist (in the folder opened)", src, err)
			}
		})
	}
}

// A checkpoint_* folder, its manifest or a file in it that belongs to another user is
// never resumed from: Latest skips it with a reason naming the owner, List leaves it out,
// Verify refuses it.
func TestLatestRefusesAnotherUsersCheckpoint(t *testing.T) {
	needRoot(t)
	cases := map[string]string{ // what belongs to the other user: the reason
		"folder":   "checkpoint_000500 belongs to uid 12345",
		"manifest": "checkpoint_000500: its manifest " + ManifestName + " belongs to uid 12345",
		"file":     "checkpoint_000500: checkpoint.pt belongs to uid 12345",
	}
	for what, want := range cases {
		t.Run(what, func(t *testing.T) {
			s := openStore(t)
			commitSample(t, s, t.TempDir(), 1)
			ckpt := forge(t, s.Dir(), "checkpoint_000500", forged)
			switch what {
			case "folder":
				chownTree(t, ckpt, otherUID)
			case "manifest":
				must(t, os.Lchown(filepath.Join(ckpt, ManifestName), otherUID, otherUID))
			case "file":
				must(t, os.Lchown(filepath.Join(ckpt, "checkpoint.pt"), otherUID, otherUID))
			}
			latest, skipped, err := s.Latest()
			if err != nil || latest.Name != "checkpoint_000001" {
				t.Fatalf("Latest: %s, %v; want checkpoint_000001", latest.Name, err)
			}
			if len(skipped) != 1 || !errors.Is(skipped[0], ErrNotOwned) || !strings.Contains(skipped[0].Error(), want) {
				t.Errorf("skipped %v, want one wrapping ErrNotOwned with %q", skipped, want)
			}
			if _, _, err := s.LatestBefore(2); err != nil {
				t.Errorf("LatestBefore: %v", err)
			}
			if _, err := Verify(ckpt); !errors.Is(err, ErrNotOwned) {
				t.Errorf("Verify: %v, want ErrNotOwned", err)
			}
			if what != "file" {
				if got := listNames(t, s); len(got) != 1 {
					t.Errorf("List: %v, want only checkpoint_000001", got)
				}
			}
		})
	}
}

// Take refuses a folder, or a file in it, of another user: a root job handed a folder
// that someone else could write would commit their files as its checkpoint.
func TestTakeRefusesAnotherUsersFolder(t *testing.T) {
	needRoot(t)
	for _, what := range []string{"folder", "file"} {
		t.Run(what, func(t *testing.T) {
			s := openStore(t)
			src := writeCheckpoint(t, t.TempDir(), 1)
			if what == "folder" {
				must(t, os.Lchown(src, otherUID, otherUID))
			} else {
				must(t, os.Lchown(filepath.Join(src, "model.pt"), otherUID, otherUID))
			}
			_, err := s.Take(src)
			if !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), "uid 12345") {
				t.Errorf("Take: %v, want ErrNotOwned naming uid 12345", err)
			}
			if _, err := os.Stat(filepath.Join(src, "model.pt")); err != nil {
				t.Errorf("a refused Take moved the files: %v", err)
			}
		})
	}
}

// A .staging that is a link, or another user's, is refused by Open.
func TestOpenRefusesUntrustedStaging(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	must(t, os.MkdirAll(dir, 0o700))
	target := t.TempDir()
	must(t, os.Symlink(target, filepath.Join(dir, StagingDir)))
	if _, err := Open(dir, nil); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Open with .staging a link: %v, want a refusal", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	must(t, os.Remove(filepath.Join(dir, StagingDir)))
	must(t, os.Mkdir(filepath.Join(dir, StagingDir), 0o777))
	must(t, os.Lchown(filepath.Join(dir, StagingDir), otherUID, otherUID))
	if _, err := Open(dir, nil); !errors.Is(err, ErrNotOwned) {
		t.Errorf("Open with another user's .staging: %v, want ErrNotOwned", err)
	}
}
