package upload

import (
	"archive/zip"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the seed corpus in testdata/fuzz/FuzzExtract")

// fuzzLimits keep each fuzz run small.
var fuzzLimits = Limits{MaxArchiveBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxFiles: 64}

// FuzzExtract checks that Extract never panics, never writes outside its destination, and
// leaves either nothing or a tree of regular files and folders within the limits.
func FuzzExtract(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		parent := filepath.Join(root, "a", "b")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(parent, "keep.txt"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, root)
		dest := filepath.Join(parent, "dest")
		err := Extract(bytes.NewReader(data), int64(len(data)), dest, fuzzLimits)
		if err != nil && !errors.Is(err, ErrBadArchive) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("Extract: %v; want a refusal (ErrBadArchive or ErrTooLarge)", err)
		}
		after := snapshot(t, root)
		for rel := range after {
			if rel == "a/b/dest" || strings.HasPrefix(rel, "a/b/dest/") {
				delete(after, rel)
			}
		}
		if !mapsEqual(before, after) {
			t.Fatalf("Extract changed files outside its destination:\nbefore %v\nafter  %v", before, after)
		}
		checkDestTree(t, dest, err == nil)
	})
}

// checkDestTree checks that dest exists only when want is true, and then holds only
// regular files and folders within fuzzLimits.
func checkDestTree(t *testing.T, dest string, want bool) {
	t.Helper()
	_, err := os.Lstat(dest)
	if exists := err == nil; exists != want {
		t.Fatalf("destination exists: %v; want %v", exists, want)
	}
	if !want {
		return
	}
	var entries int
	var total int64
	err = filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dest {
			return err
		}
		entries++
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.IsDir() && !info.Mode().IsRegular() {
			return fmt.Errorf("%s is %s", p, info.Mode())
		}
		if !info.IsDir() {
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk destination: %v", err)
	}
	if total > fuzzLimits.MaxTotalBytes || entries > fuzzLimits.MaxFiles {
		t.Errorf("destination holds %d entries and %d bytes; limits are %+v", entries, total, fuzzLimits)
	}
}

// mapsEqual reports whether a and b hold the same keys and values.
func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestFuzzSeeds checks that the seed corpus of FuzzExtract is in testdata, and writes it
// with -update.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzExtract")
	for name, data := range fuzzSeeds(t) {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			contents := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(path, []byte(contents), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("seed %s is missing (go test -run TestFuzzSeeds -update ./internal/upload/): %v", name, err)
		}
	}
}

// fuzzSeeds returns the archives the fuzzer starts from, by file name: good ones and one
// of each kind that Extract refuses.
func fuzzSeeds(t *testing.T) map[string][]byte {
	zeros := make([]byte, 64<<10)
	return map[string][]byte{
		"tree": zipOf(t, dirEntry("proj/"), fileEntry("proj/main.py", "print('hi')\n"),
			fileEntry("proj/run.sh", "#!/bin/sh\n").withMode(0o755), fileEntry("proj/pkg/mod.py", "x = 1\n"),
			dirEntry("proj/empty/"), fileEntry("top.txt", "top\n").stored()),
		"empty":          zipOf(t),
		"ray-empty-root": zipOf(t, dirEntry("./")),
		"ray-root-twice": zipOf(t, dirEntry("./"), dirEntry("./"), fileEntry("./a", "x")),
		"not-a-zip":      []byte("#!/bin/sh\necho not a zip\n"),
		"symlink":        zipOf(t, fileEntry("a.txt", "a"), symlinkEntry("link", "../../etc/passwd")),
		"symlink-folder": zipOf(t, dirEntry("d/").withUnixMode(0o120777)),
		"device":         zipOf(t, fileEntry("sda", "").withMode(fs.ModeDevice|0o660)),
		"dot-dot":        zipOf(t, fileEntry("a.txt", "a"), fileEntry("../evil", "x")),
		"deep-dot-dot":   zipOf(t, fileEntry("a/b/../../../evil", "x")),
		"absolute":       zipOf(t, fileEntry("/tmp/evil", "x")),
		"backslash":      zipOf(t, fileEntry(`..\evil`, "x")),
		"not-utf8":       zipOf(t, fileEntry("bad\xff.txt", "x")),
		"nul":            zipOf(t, fileEntry("a\x00b", "x")),
		"duplicate":      zipOf(t, fileEntry("a.txt", "one"), fileEntry("a.txt", "two")),
		"file-as-parent": zipOf(t, fileEntry("d", "x"), fileEntry("d/e", "y")),
		"lying-size":     zipOf(t, fileEntry("ok.txt", "ok"), lyingEntry("zeros", zeros, 10, 0)),
		"bad-checksum":   zipOf(t, lyingEntry("bad", []byte("data"), 4, 12345)),
		"encrypted":      zipOf(t, rawEntry("a.txt", zip.Store, 0x1, "x")),
		"unknown-method": zipOf(t, rawEntry("a.txt", 99, 0, "x")),
		"zip-bomb":       zipOf(t, fileEntry("zeros", string(make([]byte, 2<<20)))),
	}
}
