package upload

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// pkgName is a package name as Ray's clients make them.
const pkgName = "_ray_pkg_0123456789abcdef.zip"

func TestStorePutHasOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "packages")
	s := newTestStore(t, dir)
	archive := zipOf(t, fileEntry("main.py", "print('hi')\n"))
	if err := s.Put(pkgName, bytes.NewReader(archive), Limits{}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	has, err := s.Has(pkgName)
	if err != nil || !has {
		t.Errorf("Has = %v, %v; want true", has, err)
	}
	if diff := cmp.Diff(archive, readPackage(t, s, pkgName)); diff != "" {
		t.Errorf("Open contents (-want +got):\n%s", diff)
	}
	want := map[string]string{pkgName: fileDesc(0o600, string(archive))}
	if diff := cmp.Diff(want, topLevel(t, dir)); diff != "" {
		t.Errorf("store folder, no temporary files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fs.ModeDir|0o700, modeOf(t, dir)); diff != "" {
		t.Errorf("store folder mode (-want +got):\n%s", diff)
	}
}

func TestStoreOpenThenExtract(t *testing.T) {
	s := newTestStore(t, t.TempDir())
	archive := zipOf(t, fileEntry("main.py", "print('hi')\n"))
	if err := s.Put(pkgName, bytes.NewReader(archive), Limits{}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	f, err := s.Open(pkgName)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "job")
	if err := Extract(f, info.Size(), dest, Limits{}); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"main.py": `file 0644 "print('hi')\n"`}, snapshot(t, dest)); diff != "" {
		t.Errorf("extracted (-want +got):\n%s", diff)
	}
}

func TestStorePutReplaces(t *testing.T) {
	s := newTestStore(t, t.TempDir())
	first := zipOf(t, fileEntry("a", "first"))
	second := zipOf(t, fileEntry("a", "second"))
	for _, archive := range [][]byte{first, second} {
		if err := s.Put(pkgName, bytes.NewReader(archive), Limits{}); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	if diff := cmp.Diff(second, readPackage(t, s, pkgName)); diff != "" {
		t.Errorf("contents after the second Put (-want +got):\n%s", diff)
	}
}

// TestStorePutIsAtomic checks that a package appears only when its upload is complete.
func TestStorePutIsAtomic(t *testing.T) {
	dir := t.TempDir()
	s := newTestStore(t, dir)
	archive := zipOf(t, fileEntry("main.py", strings.Repeat("x = 1\n", 1000)))
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.Put(pkgName, pr, Limits{}) }()
	if _, err := pw.Write(archive[:len(archive)/2]); err != nil {
		t.Fatal(err)
	}
	// The first half is written to the temporary file once Write returns.
	has, err := s.Has(pkgName)
	if err != nil || has {
		t.Errorf("Has during the upload = %v, %v; want false", has, err)
	}
	if _, err := os.Stat(filepath.Join(dir, pkgName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the package's file exists during the upload: %v", err)
	}
	if _, err := pw.Write(archive[len(archive)/2:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatalf("Put: %v", err)
	}
	if diff := cmp.Diff(archive, readPackage(t, s, pkgName)); diff != "" {
		t.Errorf("contents (-want +got):\n%s", diff)
	}
}

func TestStorePutRefuses(t *testing.T) {
	small := Limits{MaxArchiveBytes: 4096}
	cases := map[string]struct {
		name    string
		body    io.Reader
		lim     Limits
		kind    error
		wantErr string
	}{
		"too large": {pkgName, &countingReader{r: zeroReader{}}, small, ErrTooLarge,
			"store package " + pkgName + ": the archive is over 4096 bytes, the most allowed"},
		"not a zip": {pkgName, strings.NewReader("just text"), small, ErrBadArchive,
			"store package " + pkgName + ": not a zip archive: zip: not a valid zip file"},
		"empty body": {pkgName, strings.NewReader(""), small, ErrBadArchive, "not a zip archive"},
		"unsafe entry": {pkgName, bytes.NewReader(zipOf(t, fileEntry("../evil", "x"))), small, ErrBadArchive,
			`entry "../evil" has a ".." path element`},
		"symlink entry": {pkgName, bytes.NewReader(zipOf(t, symlinkEntry("l", "/etc"))), small, ErrBadArchive,
			`entry "l" is a symbolic link`},
		"unpacks too large": {pkgName, bytes.NewReader(zipOf(t, fileEntry("z", string(make([]byte, 2<<20))))),
			Limits{MaxTotalBytes: 1 << 20}, ErrTooLarge, "claim more than 1048576 bytes"},
		"body read error": {pkgName, io.MultiReader(strings.NewReader("PK"), iotest.ErrReader(io.ErrUnexpectedEOF)), small, io.ErrUnexpectedEOF,
			"store package " + pkgName + ": read upload: unexpected EOF"},
		"bad name":      {"../x.zip", strings.NewReader("x"), small, ErrInvalidName, `invalid package name "../x.zip"`},
		"slash in name": {"a/b.zip", strings.NewReader("x"), small, ErrInvalidName, `invalid package name "a/b.zip"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := newTestStore(t, dir)
			err := s.Put(tc.name, tc.body, tc.lim)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Put: %v\nwant an error that wraps %q and contains %q", err, tc.kind, tc.wantErr)
			}
			if diff := cmp.Diff(map[string]string{}, topLevel(t, dir)); diff != "" {
				t.Errorf("store folder after a refused Put (-want +got):\n%s", diff)
			}
			if c, ok := tc.body.(*countingReader); ok && c.n > tc.lim.MaxArchiveBytes+1 {
				t.Errorf("Put read %d bytes of an endless body; want it to stop after %d", c.n, tc.lim.MaxArchiveBytes+1)
			}
		})
	}
}

func TestStoreRefusedPutKeepsOld(t *testing.T) {
	s := newTestStore(t, t.TempDir())
	archive := zipOf(t, fileEntry("a", "kept"))
	if err := s.Put(pkgName, bytes.NewReader(archive), Limits{}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Put(pkgName, strings.NewReader("not a zip"), Limits{}); !errors.Is(err, ErrBadArchive) {
		t.Fatalf("second Put: %v; want ErrBadArchive", err)
	}
	if diff := cmp.Diff(archive, readPackage(t, s, pkgName)); diff != "" {
		t.Errorf("contents after a refused Put (-want +got):\n%s", diff)
	}
}

func TestStoreLookups(t *testing.T) {
	s := newTestStore(t, t.TempDir())
	has, err := s.Has(pkgName)
	if err != nil || has {
		t.Errorf("Has of a missing package = %v, %v; want false, nil", has, err)
	}
	if _, err := s.Open(pkgName); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing package: %v; want fs.ErrNotExist", err)
	}
	for _, name := range []string{"../" + pkgName, "", "a/b.zip", ".put-1.tmp"} {
		if _, err := s.Has(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Has(%q): %v; want ErrInvalidName", name, err)
		}
		if _, err := s.Open(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Open(%q): %v; want ErrInvalidName", name, err)
		}
	}
}

func TestNewStoreRemovesStaleTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	files := map[string]time.Duration{
		".put-old.tmp":  2 * time.Hour,
		".put-new.tmp":  time.Minute,
		pkgName:         2 * time.Hour,
		"unrelated.tmp": 2 * time.Hour,
	}
	for name, age := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	newTestStore(t, dir)
	want := map[string]string{".put-new.tmp": `file 0600 "x"`, pkgName: `file 0600 "x"`, "unrelated.tmp": `file 0600 "x"`}
	if diff := cmp.Diff(want, topLevel(t, dir)); diff != "" {
		t.Errorf("store folder (-want +got):\n%s", diff)
	}
}

// newTestStore opens a Store in dir.
func newTestStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := NewStore(dir)
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	return s
}

// readPackage returns the contents of the stored package name.
func readPackage(t *testing.T, s *Store, name string) []byte {
	t.Helper()
	f, err := s.Open(name)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// modeOf returns the mode of the file at path.
func modeOf(t *testing.T, path string) fs.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode()
}

// zeroReader is an endless stream of zeros.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
