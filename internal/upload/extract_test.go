package upload

import (
	"archive/zip"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// smallLimits are limits small enough for tests to pass them.
var smallLimits = Limits{MaxArchiveBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxFiles: 8}

func TestExtractTree(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, over the 64-byte inline description
	archive := zipOf(t,
		dirEntry("proj/"),
		fileEntry("proj/main.py", "print('hi')\n"),
		fileEntry("proj/run.sh", "#!/bin/sh\necho hi\n").withMode(0o755),
		fileEntry("proj/setuid.sh", "#!/bin/sh\n").withMode(fs.ModeSetuid|0o4755),
		fileEntry("proj/private.txt", "secret").withMode(0o600),
		fileEntry("proj/pkg/__init__.py", ""),
		fileEntry("proj/pkg/deep/er/mod.py", "x = 1\n"),
		dirEntry("proj/empty/"),
		fileEntry("proj/data/big.bin", string(big)),
		fileEntry("proj/ünïcode name.txt", "ü\n").stored(),
		fileEntry("top.txt", "at the top\n").stored(),
	)
	dir := t.TempDir()
	dest := filepath.Join(dir, "job")
	if err := Extract(bytes.NewReader(archive), int64(len(archive)), dest, Limits{}); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	want := map[string]string{
		"proj":                    "dir 0755",
		"proj/main.py":            `file 0644 "print('hi')\n"`,
		"proj/run.sh":             `file 0755 "#!/bin/sh\necho hi\n"`,
		"proj/setuid.sh":          `file 0755 "#!/bin/sh\n"`,
		"proj/private.txt":        `file 0644 "secret"`,
		"proj/pkg":                "dir 0755",
		"proj/pkg/__init__.py":    `file 0644 ""`,
		"proj/pkg/deep":           "dir 0755",
		"proj/pkg/deep/er":        "dir 0755",
		"proj/pkg/deep/er/mod.py": `file 0644 "x = 1\n"`,
		"proj/empty":              "dir 0755",
		"proj/data":               "dir 0755",
		"proj/data/big.bin":       fileDesc(0o644, string(big)),
		"proj/ünïcode name.txt":   `file 0644 "ü\n"`,
		"top.txt":                 `file 0644 "at the top\n"`,
	}
	if diff := cmp.Diff(want, snapshot(t, dest)); diff != "" {
		t.Errorf("extracted tree (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"job": "dir 0755"}, topLevel(t, dir)); diff != "" {
		t.Errorf("beside the destination (-want +got):\n%s", diff)
	}
}

func TestExtractEmptyArchive(t *testing.T) {
	archive := zipOf(t)
	dest := filepath.Join(t.TempDir(), "job")
	if err := Extract(bytes.NewReader(archive), int64(len(archive)), dest, Limits{}); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if diff := cmp.Diff(map[string]string{}, snapshot(t, dest)); diff != "" {
		t.Errorf("extracted tree (-want +got):\n%s", diff)
	}
}

func TestExtractRefuses(t *testing.T) {
	good := zipOf(t, fileEntry("a.txt", "hello"))
	zeros := make([]byte, 2<<20)
	cases := map[string]struct {
		archive []byte
		lim     Limits
		kind    error
		wantErr string
	}{
		"not a zip":     {[]byte("#!/bin/sh\nrm -rf /\n"), smallLimits, ErrBadArchive, "not a zip archive: zip: not a valid zip file"},
		"empty input":   {nil, smallLimits, ErrBadArchive, "not a zip archive"},
		"truncated zip": {good[:len(good)-8], smallLimits, ErrBadArchive, "not a zip archive"},
		"symlink": {zipOf(t, fileEntry("proj/a.py", ""), symlinkEntry("proj/passwd", "/etc/passwd")), smallLimits, ErrBadArchive,
			`entry "proj/passwd" is a symbolic link; only regular files and folders are allowed`},
		"symlink then write through it": {zipOf(t, symlinkEntry("up", ".."), fileEntry("up/evil", "x")), smallLimits, ErrBadArchive,
			`entry "up" is a symbolic link`},
		"symlink folder": {zipOf(t, dirEntry("d/").withUnixMode(0o120777)), smallLimits, ErrBadArchive,
			`entry "d/" is a symbolic link`},
		"device":     {zipOf(t, fileEntry("sda", "").withMode(fs.ModeDevice|0o660)), smallLimits, ErrBadArchive, `entry "sda" is a device`},
		"named pipe": {zipOf(t, fileEntry("fifo", "").withMode(fs.ModeNamedPipe|0o644)), smallLimits, ErrBadArchive, `entry "fifo" is a named pipe`},
		"socket":     {zipOf(t, fileEntry("sock", "").withMode(fs.ModeSocket|0o644)), smallLimits, ErrBadArchive, `entry "sock" is a socket`},
		"dot-dot": {zipOf(t, fileEntry("a.txt", "ok"), fileEntry("../evil", "x")), smallLimits, ErrBadArchive,
			`entry "../evil" has a ".." path element, which could write outside the destination (zip slip)`},
		"deep dot-dot":   {zipOf(t, fileEntry("a/b/../../../../evil", "x")), smallLimits, ErrBadArchive, `entry "a/b/../../../../evil" has a ".." path element`},
		"inner dot-dot":  {zipOf(t, fileEntry("a/../b", "x")), smallLimits, ErrBadArchive, `entry "a/../b" has a ".." path element`},
		"dot-dot folder": {zipOf(t, dirEntry("../")), smallLimits, ErrBadArchive, `entry "../" has a ".." path element`},
		"absolute": {zipOf(t, fileEntry("/abs", "x")), smallLimits, ErrBadArchive,
			`entry "/abs" has an absolute path; names must be relative to the package's folder`},
		"absolute folder": {zipOf(t, dirEntry("/etc/")), smallLimits, ErrBadArchive, `entry "/etc/" has an absolute path`},
		"backslash": {zipOf(t, fileEntry(`..\evil`, "x")), smallLimits, ErrBadArchive,
			`entry "..\\evil" has a backslash in its name; zip names use '/'`},
		"empty element": {zipOf(t, fileEntry("a//b", "x")), smallLimits, ErrBadArchive, `entry "a//b" has an empty or "." path element`},
		"dot element":   {zipOf(t, fileEntry("./a", "x")), smallLimits, ErrBadArchive, `entry "./a" has an empty or "." path element`},
		"root folder":   {zipOf(t, dirEntry("/")), smallLimits, ErrBadArchive, `entry "/" has an absolute path`},
		"empty name":    {zipOf(t, fileEntry("", "x")), smallLimits, ErrBadArchive, "an entry has an empty name"},
		"long element": {zipOf(t, fileEntry(strings.Repeat("n", 256), "x")), smallLimits, ErrBadArchive,
			"has a path element longer than 255 bytes"},
		"not UTF-8": {zipOf(t, fileEntry("bad\xff.txt", "x")), smallLimits, ErrBadArchive,
			`entry "bad\xff.txt" has a name that is not valid UTF-8`},
		"NUL": {zipOf(t, fileEntry("a\x00.txt", "x")), smallLimits, ErrBadArchive, `entry "a\x00.txt" has a NUL byte in its name`},
		"duplicate": {zipOf(t, fileEntry("a.txt", "one"), fileEntry("a.txt", "two")), smallLimits, ErrBadArchive,
			`entry "a.txt": the archive has another entry by that name`},
		"duplicate folder": {zipOf(t, dirEntry("d/"), dirEntry("d/")), smallLimits, ErrBadArchive, `entry "d/": the archive has another entry by that name`},
		"file and folder":  {zipOf(t, fileEntry("d", "x"), dirEntry("d/")), smallLimits, ErrBadArchive, `entry "d/": the archive has another entry by that name`},
		"file as parent": {zipOf(t, fileEntry("d", "x"), fileEntry("d/e/f", "y")), smallLimits, ErrBadArchive,
			`entry "d/e/f" needs "d" to be a folder, but the archive has a file by that name`},
		"file where a folder is needed": {zipOf(t, fileEntry("d/e", "y"), fileEntry("d", "x")), smallLimits, ErrBadArchive,
			`entry "d" is a file, but other entries need a folder by that name`},
		"too many implied folders": {zipOf(t, fileEntry("a/b/c/d/e/f/g/h/i", "x")), smallLimits, ErrTooLarge,
			"the archive unpacks to more than 8 files and folders, the most allowed"},
		"long name": {zipOf(t, fileEntry(strings.Repeat("abcdefg/", 513)+"x", "x")), smallLimits, ErrBadArchive,
			"has a name longer than 4096 bytes"},
		"encrypted": {zipOf(t, rawEntry("a.txt", zip.Store, 0x1, "x")), smallLimits, ErrBadArchive,
			`entry "a.txt" is encrypted, which is not supported`},
		"unknown method": {zipOf(t, rawEntry("a.txt", 99, 0, "x")), smallLimits, ErrBadArchive,
			`entry "a.txt" uses compression method 99; only store (0) and deflate (8) are supported`},
		"too many entries": {zipOf(t, dirEntry("d/"), fileEntry("d/1", ""), fileEntry("d/2", "")), Limits{MaxFiles: 2}, ErrTooLarge,
			"the archive has 3 entries; at most 2 are allowed"},
		"archive too large": {good, Limits{MaxArchiveBytes: 10}, ErrTooLarge, "; at most 10 are allowed"},
		"honest zip bomb": {zipOf(t, fileEntry("zeros", string(zeros))), smallLimits, ErrTooLarge,
			"the archive's files claim more than 1048576 bytes unpacked, the most allowed"},
		"files add up": {zipOf(t, fileEntry("a", string(zeros[:600<<10])), fileEntry("b", string(zeros[:600<<10]))), smallLimits, ErrTooLarge,
			"the archive's files claim more than 1048576 bytes unpacked"},
		"lying size": {zipOf(t, fileEntry("ok.txt", "fine"), lyingEntry("zeros", zeros, 10, 0)), smallLimits, ErrBadArchive,
			`entry "zeros" holds more data than its header says, or is damaged`},
		"lying size, no limit hit": {zipOf(t, lyingEntry("zeros", zeros[:100], 10, 0)), smallLimits, ErrBadArchive,
			`entry "zeros" holds more data than its header says, or is damaged`},
		"short data": {zipOf(t, lyingEntry("short", []byte("tiny"), 100, 0)), smallLimits, ErrBadArchive, `entry "short" cannot be read`},
		"bad checksum": {zipOf(t, fileEntry("ok.txt", "fine"), lyingEntry("bad", []byte("data"), 4, 12345)), smallLimits, ErrBadArchive,
			`entry "bad" is damaged: its checksum does not match`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := extractRefused(t, tc.archive, tc.lim)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Extract: %v\nwant an error that wraps %q and contains %q", err, tc.kind, tc.wantErr)
			}
		})
	}
}

func TestExtractDestExists(t *testing.T) {
	archive := zipOf(t, fileEntry("a.txt", "hello"))
	for name, mk := range map[string]func(string) error{
		"empty folder": func(p string) error { return os.Mkdir(p, 0o755) },
		"file":         func(p string) error { return os.WriteFile(p, []byte("keep"), 0o644) },
		"symlink":      func(p string) error { return os.Symlink("/nowhere", p) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			dest := filepath.Join(dir, "job")
			if err := mk(dest); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			err := Extract(bytes.NewReader(archive), int64(len(archive)), dest, Limits{})
			if !errors.Is(err, fs.ErrExist) {
				t.Errorf("Extract: %v; want an error that wraps fs.ErrExist", err)
			}
			if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
				t.Errorf("folder changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestWriteEntriesCountsWrittenBytes checks the last line of defence against zip bombs:
// the bytes written are counted, whatever the headers claimed and scan checked.
func TestWriteEntriesCountsWrittenBytes(t *testing.T) {
	archive := zipOf(t, fileEntry("a", strings.Repeat("x", 600)), fileEntry("b", strings.Repeat("y", 600)))
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := scan(zr, Limits{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = writeEntries(dir, entries, Limits{MaxTotalBytes: 1000})
	want := `the archive's files hold more than 1000 bytes unpacked, the most allowed (entry "b" went past it)`
	if !errors.Is(err, ErrTooLarge) || err.Error() != want {
		t.Errorf("writeEntries: %v\nwant %q", err, want)
	}
	info, err := os.Stat(filepath.Join(dir, "b"))
	if err != nil || info.Size() > 401 {
		t.Errorf("b was written past the budget: %v, %v", info, err)
	}
}

// extractRefused runs Extract on archive, which it must refuse, in a new folder
// <tmp>/a/b/dest, and fails the test if anything changed under <tmp>.
func extractRefused(t *testing.T, archive []byte, lim Limits) error {
	t.Helper()
	root := t.TempDir()
	parent := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "keep.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)
	err := Extract(bytes.NewReader(archive), int64(len(archive)), filepath.Join(parent, "dest"), lim)
	if err == nil {
		t.Fatalf("Extract succeeded; want a refusal")
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("files changed around a refused Extract (-before +after):\n%s", diff)
	}
	return err
}

// topLevel describes the entries of the folder dir, without descending.
func topLevel(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = describe(filepath.Join(dir, e.Name()), info)
	}
	return got
}
