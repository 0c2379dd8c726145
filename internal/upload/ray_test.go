package upload

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestExtractRayPackages stores and unpacks archives made with the zipfile calls of
// Ray's working_dir packager (testdata/ray/package.py): an empty working_dir, which Ray
// zips as the one folder entry "./", and a project with an empty folder, an executable
// script and links, which Ray follows.
func TestExtractRayPackages(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3 to zip folders as Ray's packager does")
	}
	cases := map[string]struct {
		make      func(t *testing.T, dir string)
		wantNames []string
		want      map[string]string
	}{
		"empty working_dir": {
			make:      func(t *testing.T, dir string) {},
			wantNames: []string{"./"},
			want:      map[string]string{},
		},
		"project": {
			make: func(t *testing.T, dir string) {
				writeTree(t, dir, map[string]string{"train.py": "print(1)\n", "pkg/mod.py": "x = 1\n", "data/note.txt": "n\n"})
				mustDo(t, os.Mkdir(filepath.Join(dir, "outputs"), 0o755))
				mustDo(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
				mustDo(t, os.Symlink("train.py", filepath.Join(dir, "alias.py")))
				mustDo(t, os.Symlink("data", filepath.Join(dir, "linked")))
			},
			wantNames: []string{"alias.py", "data/note.txt", "linked/note.txt", "outputs/", "pkg/mod.py", "run.sh", "train.py"},
			want: map[string]string{
				"alias.py":        `file 0644 "print(1)\n"`,
				"data":            "dir 0755",
				"data/note.txt":   `file 0644 "n\n"`,
				"linked":          "dir 0755",
				"linked/note.txt": `file 0644 "n\n"`,
				"outputs":         "dir 0755",
				"pkg":             "dir 0755",
				"pkg/mod.py":      `file 0644 "x = 1\n"`,
				"run.sh":          `file 0755 "#!/bin/sh\n"`,
				"train.py":        `file 0644 "print(1)\n"`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			src := filepath.Join(tmp, "working_dir")
			mustDo(t, os.Mkdir(src, 0o755))
			tc.make(t, src)
			pkg := filepath.Join(tmp, "_ray_pkg_0123abcd.zip")
			out, err := exec.Command(python, filepath.Join("testdata", "ray", "package.py"), src, pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("package.py: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tc.wantNames, strings.Fields(string(out))); diff != "" {
				t.Fatalf("the entries Ray's packager writes (-want +got):\n%s", diff)
			}
			data, err := os.ReadFile(pkg)
			mustDo(t, err)
			store, err := NewStore(filepath.Join(tmp, "store"))
			mustDo(t, err)
			mustDo(t, store.Put(filepath.Base(pkg), bytes.NewReader(data), Limits{}))
			f, err := store.Open(filepath.Base(pkg))
			mustDo(t, err)
			defer f.Close()
			dest := filepath.Join(tmp, "job")
			if err := Extract(f, int64(len(data)), dest, Limits{}); err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if diff := cmp.Diff(tc.want, snapshot(t, dest)); diff != "" {
				t.Errorf("extracted tree (-want +got):\n%s", diff)
			}
		})
	}
}

// The root entry "./" is the only "." allowed, once, as a folder; everything hostile
// around it is still refused.
func TestExtractRefusesAroundTheRootEntry(t *testing.T) {
	cases := map[string]struct {
		archive []byte
		wantErr string
	}{
		"root twice":         {zipOf(t, dirEntry("./"), dirEntry("./")), `entry "./": the archive has another entry by that name`},
		"dot file":           {zipOf(t, fileEntry(".", "x")), `entry "." has an empty or "." path element`},
		"dot folder inside":  {zipOf(t, dirEntry("a/./")), `entry "a/./" has an empty or "." path element`},
		"dot prefix":         {zipOf(t, dirEntry("./"), fileEntry("./a.py", "x")), `entry "./a.py" has an empty or "." path element`},
		"root then dot-dot":  {zipOf(t, dirEntry("./"), fileEntry("../evil", "x")), `entry "../evil" has a ".." path element`},
		"root then absolute": {zipOf(t, dirEntry("./"), fileEntry("/etc/cron.d/x", "x")), `entry "/etc/cron.d/x" has an absolute path`},
		"root as a symlink":  {zipOf(t, dirEntry("./").withUnixMode(0o120777)), `entry "./" is a symbolic link`},
		"dot-dot root":       {zipOf(t, dirEntry("../")), `entry "../" has a ".." path element`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := extractRefused(t, tc.archive, smallLimits)
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Extract: %v\nwant an error that contains %q", err, tc.wantErr)
			}
		})
	}
}

// writeTree writes files (slash-separated name -> contents) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		mustDo(t, os.MkdirAll(filepath.Dir(p), 0o755))
		mustDo(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
