package client

import (
	"archive/zip"
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/upload"
)

// writeTree writes files (slash-separated name -> content) under dir; a name ending in
// ".sh" is executable.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// The zip holds the folder's files and folders by relative name, with their executable
// bit; symbolic links are left out and reported; the name is Ray's, from the content.
func TestPackDir(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"run.sh": "cat data/x.txt\n", "data/x.txt": "x\n"})
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	var skipped []string
	pkg, err := PackDir(dir, func(path string) { skipped = append(skipped, path) })
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^_ray_pkg_[0-9a-f]{16}\.zip$`).MatchString(pkg.Name) || pkg.URI() != "gcs://"+pkg.Name {
		t.Errorf("name %q, URI %q", pkg.Name, pkg.URI())
	}
	if want := []string{filepath.Join(dir, "link")}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	zr, err := zip.NewReader(bytes.NewReader(pkg.Data), int64(len(pkg.Data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.Name == "run.sh" && f.Mode()&0o100 == 0 {
			t.Errorf("run.sh lost its executable bit: %v", f.Mode())
		}
	}
	if want := []string{"data/", "data/x.txt", "empty/", "run.sh"}; !slices.Equal(names, want) {
		t.Errorf("entries %v, want %v", names, want)
	}
	// The server unpacks it as it is.
	out := filepath.Join(t.TempDir(), "out")
	if err := upload.Extract(bytes.NewReader(pkg.Data), int64(len(pkg.Data)), out, upload.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(out, "data", "x.txt")); err != nil || string(data) != "x\n" {
		t.Errorf("unpacked data/x.txt: %q, %v", data, err)
	}
	again, err := PackDir(dir, nil)
	if err != nil || again.Name != pkg.Name {
		t.Errorf("packing the same folder again: %q, %v; want the same name %q", again.Name, err, pkg.Name)
	}
}

// A folder beyond the limits is refused, naming the limit; so is a file.
func TestPackDirRefuses(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": strings.Repeat("a", 3000), "b.txt": "b"})
	cases := map[string]struct {
		lim  upload.Limits
		want string
	}{
		"total":   {upload.Limits{MaxArchiveBytes: 1 << 20, MaxTotalBytes: 2000, MaxFiles: 10}, "holds more than 2000 bytes"},
		"files":   {upload.Limits{MaxArchiveBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxFiles: 1}, "more than 1 files and folders"},
		"archive": {upload.Limits{MaxArchiveBytes: 100, MaxTotalBytes: 1 << 20, MaxFiles: 10}, "at most 100"},
	}
	for name, c := range cases {
		if _, err := packDir(dir, c.lim, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one with %q", name, err, c.want)
		}
	}
	if _, err := PackDir(filepath.Join(dir, "a.txt"), nil); err == nil || !strings.Contains(err.Error(), "is not a folder") {
		t.Errorf("a file: error %v", err)
	}
}

// A folder uploaded as Ray's clients do it and named in a submission: the server unpacks
// it into the job's own working folder.
func TestUploadPackageAndSubmit(t *testing.T) {
	web := newRealServer(t)
	c := New(web.URL, testToken)
	ctx := context.Background()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"run.sh": "cat data.txt\n", "data.txt": "uploaded data\n"})
	pkg, err := PackDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if has, err := c.HasPackage(ctx, pkg.Name); err != nil || has {
		t.Fatalf("HasPackage before the upload: %v, %v", has, err)
	}
	if err := c.UploadPackage(ctx, pkg.Name, pkg.Data); err != nil {
		t.Fatal(err)
	}
	if has, err := c.HasPackage(ctx, pkg.Name); err != nil || !has {
		t.Fatalf("HasPackage after the upload: %v, %v", has, err)
	}
	job := trainJob("pkg", 0)
	job.Spec.Command = []string{"sh", "run.sh"}
	if _, err := c.Submit(ctx, SubmitRequest{ID: "pkg-1", Job: job, WorkingDirPackage: pkg.URI()}); err != nil {
		t.Fatal(err)
	}
	d, err := c.Get(ctx, "pkg-1")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(d.Spec.Spec.WorkingDir, "data.txt"))
	if err != nil || string(data) != "uploaded data\n" {
		t.Errorf("the job's working folder %s holds data.txt %q, %v", d.Spec.Spec.WorkingDir, data, err)
	}
	_, err = c.Submit(ctx, SubmitRequest{Job: job, WorkingDirPackage: "gcs://_ray_pkg_0000000000000000.zip"})
	wantRefusal(t, "a package not uploaded", err, http.StatusBadRequest, "does not exist: upload it first")
	err = c.UploadPackage(ctx, "_ray_pkg_1.zip", []byte("not a zip"))
	wantRefusal(t, "not a zip", err, http.StatusBadRequest, "not a zip archive")
}
