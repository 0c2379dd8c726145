package server

import (
	"archive/zip"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/upload"
)

// The upload flow of Ray's clients: ask whether the package exists, PUT it, then submit
// a job whose working_dir names it; the job starts in the unpacked folder.
func TestRayPackageWorkingDir(t *testing.T) {
	e := newEnv(t)
	const path = "/api/packages/gcs/_ray_pkg_0123456789abcdef.zip"
	pkg := makeZip(t, map[string]string{"data.txt": "from the package\n", "scripts/run.sh": "cat data.txt\n"})

	if r := e.request("GET", path, nil); r.status != http.StatusNotFound {
		t.Fatalf("GET of a package not uploaded: %d %s, want 404", r.status, r.body)
	}
	put := e.request("PUT", path, pkg, "Content-Type", "application/octet-stream")
	wantStatus(t, put, http.StatusOK)
	wantStatus(t, e.request("GET", path, nil), http.StatusOK)

	id := e.raySubmitJob(map[string]any{"entrypoint": "sh scripts/run.sh",
		"runtime_env": map[string]any{"working_dir": "gcs://_ray_pkg_0123456789abcdef.zip"}})
	d := e.rayWait(id, "SUCCEEDED")
	if d["runtime_env"].(map[string]any)["working_dir"] != "gcs://_ray_pkg_0123456789abcdef.zip" {
		t.Errorf("runtime_env %v, want it as submitted", d["runtime_env"])
	}
	logs := decode[map[string]string](t, e.request("GET", "/api/jobs/"+id+"/logs", nil))
	if !strings.Contains(logs["logs"], "from the package") {
		t.Errorf("the job did not read the package's file; logs:\n%s", logs["logs"])
	}
	// Deleting the job removes the folder it was unpacked into.
	wantStatus(t, e.request("DELETE", "/api/jobs/"+id, nil), http.StatusOK)
	if left, _ := os.ReadDir(filepath.Join(e.dir, "state", "workdirs")); len(left) != 0 {
		t.Errorf("the deleted job's working folder is left: %v", left)
	}
}

// A folder of the server's machine is a working_dir too; it stays when the job is deleted.
func TestRayLocalWorkingDir(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("local note\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := e.raySubmitJob(map[string]any{"entrypoint": "cat note.txt", "runtime_env": map[string]any{"working_dir": dir}})
	e.rayWait(id, "SUCCEEDED")
	logs := decode[map[string]string](t, e.request("GET", "/api/jobs/"+id+"/logs", nil))
	if !strings.Contains(logs["logs"], "local note") {
		t.Errorf("logs %q", logs["logs"])
	}
	wantStatus(t, e.request("DELETE", "/api/jobs/"+id, nil), http.StatusOK)
	if _, err := os.Stat(filepath.Join(dir, "note.txt")); err != nil {
		t.Errorf("deleting the job touched the user's folder: %v", err)
	}
}

func TestRayPackageRefuses(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PackageLimits = upload.Limits{MaxArchiveBytes: 4096} })
	good := makeZip(t, map[string]string{"a.txt": "a"})
	cases := map[string]struct {
		method, path string
		body         []byte
		status       int
		want         string
	}{
		"bad name":            {"PUT", "/api/packages/gcs/evil.txt", good, 400, `does not end in ".zip"`},
		"hidden name":         {"PUT", "/api/packages/gcs/.x.zip", good, 400, "starts with a dot"},
		"other protocol":      {"PUT", "/api/packages/s3/_ray_pkg_a.zip", good, 400, `package protocol "s3" is not supported`},
		"not a zip":           {"PUT", "/api/packages/gcs/_ray_pkg_a.zip", []byte("plain text"), 400, "not a zip archive"},
		"zip slip":            {"PUT", "/api/packages/gcs/_ray_pkg_a.zip", zipSlip(t), 400, ".."},
		"too large":           {"PUT", "/api/packages/gcs/_ray_pkg_a.zip", bytes.Repeat([]byte("x"), 5000), 413, "at most 4096"},
		"GET bad name":        {"GET", "/api/packages/gcs/evil.txt", nil, 400, "invalid package name"},
		"GET protocol":        {"GET", "/api/packages/https/_ray_pkg_a.zip", nil, 400, "is not supported"},
		"GET not uploaded":    {"GET", "/api/packages/gcs/_ray_pkg_b.zip", nil, 404, "Package gcs://_ray_pkg_b.zip does not exist"},
		"no such endpoint":    {"POST", "/api/packages/gcs/_ray_pkg_a.zip", good, 404, "no endpoint POST /api/packages/gcs/_ray_pkg_a.zip"},
		"nested name in path": {"PUT", "/api/packages/gcs/a/_ray_pkg_a.zip", good, 404, "no endpoint"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := e.request(c.method, c.path, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.status, c.status, r.body)
			}
			if msg := errorMessage(t, r); !strings.Contains(msg, c.want) {
				t.Errorf("message %q, want it to contain %q", msg, c.want)
			}
		})
	}
	if r := e.request("GET", "/api/packages/gcs/_ray_pkg_a.zip", nil); r.status != http.StatusNotFound {
		t.Errorf("a refused upload was kept: GET answers %d", r.status)
	}
}

// zipSlip returns a zip archive whose entry points outside the folder it unpacks into.
func zipSlip(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "../../evil.sh", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("rm -rf ~\n")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A native submission names an uploaded package in workingDirPackage: the job starts in
// it, unpacked into a folder of its own, and a missing package or a workingDir too is
// refused.
func TestNativePackageWorkingDir(t *testing.T) {
	e := newEnv(t)
	const name = "_ray_pkg_fedcba9876543210.zip"
	pkg := makeZip(t, map[string]string{"data.txt": "native package data\n", "run.sh": "cat data.txt\n"})
	wantStatus(t, e.request("PUT", "/api/packages/gcs/"+name, pkg, "Content-Type", "application/octet-stream"), http.StatusOK)

	j := e.nativeSubmit(`{"id": "pkg-1", "workingDirPackage": "gcs://` + name + `", "job": ` + trainJob("sh run.sh") + `}`)
	e.waitStatus(j.ID, "SUCCEEDED")
	d := decode[JobDetail](t, e.request("GET", "/api/v1/jobs/pkg-1", nil))
	if wd := d.Spec.Spec.WorkingDir; !strings.HasPrefix(wd, filepath.Join(e.dir, "state", "workdirs", "pkg-1-")) {
		t.Errorf("workingDir %q, want a folder of the job's own under the state folder", wd)
	}
	logs := e.request("GET", "/api/v1/jobs/pkg-1/logs?rank=0", nil)
	if !strings.Contains(string(logs.body), "native package data") {
		t.Errorf("the job did not read the package's file; log:\n%s", logs.body)
	}
	wantStatus(t, e.request("DELETE", "/api/v1/jobs/pkg-1", nil), http.StatusNoContent)
	if left, _ := os.ReadDir(filepath.Join(e.dir, "state", "workdirs")); len(left) != 0 {
		t.Errorf("the deleted job's working folder is left: %v", left)
	}

	cases := map[string]struct{ body, want string }{
		"missing":    {`{"workingDirPackage": "gcs://_ray_pkg_0000000000000000.zip", "job": ` + trainJob("true") + `}`, "package gcs://_ray_pkg_0000000000000000.zip does not exist: upload it first"},
		"protocol":   {`{"workingDirPackage": "s3://` + name + `", "job": ` + trainJob("true") + `}`, "must name an uploaded package"},
		"bad name":   {`{"workingDirPackage": "gcs://evil.txt", "job": ` + trainJob("true") + `}`, "workingDirPackage: "},
		"workingDir": {`{"workingDirPackage": "gcs://` + name + `", "job": ` + trainJob("true", `"workingDir": "/tmp"`) + `}`, "both set"},
	}
	for what, c := range cases {
		r := e.request("POST", "/api/v1/jobs", []byte(c.body))
		if r.status != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", what, r.status, r.body, c.want)
		}
	}
}
