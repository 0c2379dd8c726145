package checkpoint

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCommit(t *testing.T) {
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			s := openStore(t)
			parent := scratch(t, s, path)
			for i := 1; i <= 3; i++ {
				src := writeCheckpoint(t, parent, i)
				if err := os.Chmod(src, 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(src, "model.pt"), 0o640); err != nil {
					t.Fatal(err)
				}
				meta := Meta{Iteration: 10 * i, Attempt: 1, Rank: 0, Time: time.Date(2026, 1, 2, 3, 4, i, 0, time.UTC),
					Metrics: map[string]float64{"loss": 1 / float64(i)}}
				info, err := s.Commit(src, meta)
				if err != nil {
					t.Fatal(err)
				}
				checkCommitted(t, s, info, i, meta)
				checkSourceEmptied(t, src, 0o750)
			}
			if got := siblings(t, parent); len(got) != 0 {
				t.Errorf("private folders left next to the sources: %v", got)
			}
			if got := stagingEntries(t, s); len(got) != 0 {
				t.Errorf(".staging holds %v after successful commits", got)
			}
			if diff := cmp.Diff(runFiles, withoutCheckpoints(readTree(t, s.Dir()))); diff != "" {
				t.Errorf("the run folder's other files changed (-want +got):\n%s", diff)
			}
		})
	}
}

// checkCommitted checks that info is the checkpoint with index i, holding sampleFiles(i).
func checkCommitted(t *testing.T, s *Store, info Info, i int, meta Meta) {
	t.Helper()
	name := checkpointName(i)
	want := Manifest{Version: ManifestVersion, Name: name, Index: i, Meta: meta, Files: manifestFiles(sampleFiles(i))}
	if diff := cmp.Diff(want, info.Manifest); diff != "" {
		t.Errorf("manifest of commit %d (-want +got):\n%s", i, diff)
	}
	if info.Name != name || info.Index != i || info.Dir != filepath.Join(s.Dir(), name) {
		t.Errorf("commit %d: Info %s %d %s", i, info.Name, info.Index, info.Dir)
	}
	m, err := Verify(info.Dir)
	if err != nil {
		t.Errorf("Verify: %v", err)
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("manifest on disk (-want +got):\n%s", diff)
	}
	wantFiles := sampleFiles(i)
	wantFiles[ManifestName] = readTree(t, info.Dir)[ManifestName]
	if diff := cmp.Diff(wantFiles, readTree(t, info.Dir)); diff != "" {
		t.Errorf("files of %s (-want +got):\n%s", name, diff)
	}
	fi, err := os.Stat(filepath.Join(info.Dir, "model.pt"))
	if err != nil || fi.Mode().Perm() != 0o440 {
		t.Errorf("model.pt: mode %v (%v), want 0440 (its 0640, read-only)", fi.Mode(), err)
	}
	latest, skipped, err := s.Latest()
	if err != nil || len(skipped) > 0 || latest.Name != name {
		t.Errorf("Latest = %s, %v, %v; want %s", latest.Name, skipped, err, name)
	}
}

// checkSourceEmptied checks that src is an empty folder with the given permissions.
func checkSourceEmptied(t *testing.T, src string, perm os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(src)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != perm {
		t.Fatalf("source after commit: %v, %v; want an empty folder with mode %v", fi, err, perm)
	}
	if entries, _ := os.ReadDir(src); len(entries) != 0 {
		t.Errorf("source after commit holds %d entries, want none", len(entries))
	}
}

// withoutCheckpoints drops the files of checkpoints from a readTree result.
func withoutCheckpoints(files map[string]string) map[string]string {
	out := map[string]string{}
	for rel, content := range files {
		if !strings.HasPrefix(rel, "checkpoint_") {
			out[rel] = content
		}
	}
	return out
}

func TestIndicesSurviveReopenAndLeftovers(t *testing.T) {
	s := openStore(t)
	parent := t.TempDir()
	commitSample(t, s, parent, 1)
	commitSample(t, s, parent, 2)
	// A crashed commit of checkpoint 7 left a half-copied folder in .staging.
	writeFiles(t, filepath.Join(s.Dir(), StagingDir, "checkpoint_000007.0123abcd"), map[string]string{"model.pt": "half"})
	s = reopen(t, s)
	if got := stagingEntries(t, s); len(got) != 0 {
		t.Errorf("Open left %v in .staging", got)
	}
	if info := commitSample(t, s, parent, 3); info.Name != "checkpoint_000008" {
		t.Errorf("commit after a crashed checkpoint_000007: %s, want checkpoint_000008", info.Name)
	}
	if diff := cmp.Diff([]string{"checkpoint_000001", "checkpoint_000002", "checkpoint_000008"}, listNames(t, s)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestMetricsNotFinite(t *testing.T) {
	s := openStore(t)
	meta := Meta{Iteration: 1, Metrics: map[string]float64{"loss": math.NaN(), "grad": math.Inf(1), "acc": 0.5}}
	if _, err := s.Commit(writeCheckpoint(t, t.TempDir(), 1), meta); err != nil {
		t.Fatal(err)
	}
	infos, err := s.List()
	if err != nil || len(infos) != 1 {
		t.Fatalf("List: %v, %v", infos, err)
	}
	got := infos[0].Manifest.Meta.Metrics
	if !math.IsNaN(got["loss"]) || !math.IsInf(got["grad"], 1) || got["acc"] != 0.5 {
		t.Errorf("metrics read back: %v", got)
	}
	var raw map[string]any
	data, _ := os.ReadFile(filepath.Join(infos[0].Dir, ManifestName))
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"loss": "NaN", "grad": "+Inf", "acc": 0.5}
	if diff := cmp.Diff(want, raw["meta"].(map[string]any)["metrics"]); diff != "" {
		t.Errorf("metrics in the manifest (-want +got):\n%s", diff)
	}
}

func TestCommitStagingBroken(t *testing.T) {
	s := openStore(t)
	commitSample(t, s, t.TempDir(), 1)
	// A file where the .staging folder should be makes staging fail.
	staging := filepath.Join(s.Dir(), StagingDir)
	if err := os.Remove(staging); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staging, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := writeCheckpoint(t, t.TempDir(), 2)
	t2, err := s.Take(src)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CommitTaken(t2, Meta{})
	if err == nil || !strings.Contains(err.Error(), "commit checkpoint_000002") || !strings.Contains(err.Error(), t2.Dir) {
		t.Fatalf("commit with a broken .staging: %v; want an error naming the checkpoint and %s", err, t2.Dir)
	}
	if diff := cmp.Diff(sampleFiles(2), readTree(t, t2.Dir)); diff != "" {
		t.Errorf("files kept after the failure (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"checkpoint_000001"}, listNames(t, s)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}
