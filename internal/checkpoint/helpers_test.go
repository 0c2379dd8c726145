package checkpoint

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runFiles are files of a run folder that are not checkpoints; the store must leave them.
var runFiles = map[string]string{"run.json": `{"phase":"Running"}`, "logs/attempt-1/rank-0.log": "hello\n"}

// openStore makes a run folder, with runFiles, under a new temporary folder and opens it.
func openStore(t *testing.T) *Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "results", "run")
	writeFiles(t, dir, runFiles)
	s, err := Open(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reopen opens the store's run folder again, as a restarted process would.
func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	s2, err := Open(s.Dir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s2
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// writeFiles creates dir and the files in it (slash-separated relative path: content).
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sampleFiles returns the files of a small checkpoint; seed makes their content differ.
func sampleFiles(seed int) map[string]string {
	return map[string]string{
		"model.pt":             strings.Repeat(fmt.Sprintf("weights %d ", seed), 200),
		"optim/state.pt":       fmt.Sprintf("optimizer state %d", seed),
		"optim/sched/lr.json":  `{"lr": 0.1}`,
		"empty.txt":            "",
		"rng/rank-0/state.bin": string(bytes.Repeat([]byte{byte(seed), 0, 255}, 1000)),
	}
}

// writeCheckpoint writes sampleFiles(seed) into a new folder under parent and returns it.
func writeCheckpoint(t *testing.T, parent string, seed int) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, "ckpt-")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, sampleFiles(seed))
	return dir
}

// manifestFiles returns the manifest entries that files should get.
func manifestFiles(files map[string]string) []File {
	var out []File
	for rel, content := range files {
		crc := crc32.Checksum([]byte(content), crc32.MakeTable(crc32.Castagnoli))
		out = append(out, File{Path: rel, Size: int64(len(content)), CRC32C: fmt.Sprintf("%08x", crc)})
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// readTree returns the regular files under dir, by slash-separated relative path.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// names returns the names of infos.
func names(infos []Info) []string {
	var out []string
	for _, in := range infos {
		out = append(out, in.Name)
	}
	return out
}

// listNames returns the names List returns, failing the test on an error.
func listNames(t *testing.T, s *Store) []string {
	t.Helper()
	infos, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	return names(infos)
}

// stagingEntries returns what is in the store's .staging folder.
func stagingEntries(t *testing.T, s *Store) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Dir(), StagingDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// siblings returns the private folders that Take left in parent.
func siblings(t *testing.T, parent string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(parent, ".*.trainyard-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scratch returns a folder for checkpoint sources: on the run folder's filesystem for
// "rename", on /dev/shm for "copy" (skipping the test when /dev/shm is the same filesystem
// or missing).
func scratch(t *testing.T, s *Store, path string) string {
	t.Helper()
	if path == "rename" {
		return t.TempDir()
	}
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm, so no second filesystem for the copy path")
	}
	var a, b syscall.Stat_t
	if syscall.Stat("/dev/shm", &a) != nil || syscall.Stat(s.Dir(), &b) != nil || a.Dev == b.Dev {
		t.Skip("/dev/shm is on the run folder's filesystem, so the copy path cannot be tested")
	}
	dir, err := os.MkdirTemp("/dev/shm", "trainyard-checkpoint-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// paths are the two ways a commit stages files.
var paths = []string{"rename", "copy"}

// commitSample commits sampleFiles(seed) from a folder under parent.
func commitSample(t *testing.T, s *Store, parent string, seed int) Info {
	t.Helper()
	info, err := s.Commit(writeCheckpoint(t, parent, seed), Meta{Iteration: seed, Time: time.Unix(int64(seed), 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	return info
}
