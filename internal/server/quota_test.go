package server

import (
	"archive/zip"
	"bytes"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// setClock makes now the quota's clock.
func (q *uploadQuota) setClock(now func() time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.now = now
}

// usedBytes returns what the quota counts.
func (q *uploadQuota) usedBytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// withUploadQuota sets the server's upload quota.
func withUploadQuota(n int64) option { return func(c *Config) { c.UploadQuota = n } }

// incompressibleZip returns a zip archive of one stored file of n random bytes: it is
// about n bytes, and unpacks to n.
func incompressibleZip(t *testing.T, n int, seed uint64) []byte {
	t.Helper()
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "data.bin", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Uploads and the working folders unpacked from them share one quota: a submission or an
// upload that would pass it is refused with 507 (Ray's text on Ray's API), until a job is
// deleted (its folder goes) or a package has been idle for 10 minutes (it is removed to
// make room). A new server counts what the folders hold as the running one did.
func TestUploadQuota(t *testing.T) {
	e := newEnv(t, withUploadQuota(8000)) // a 3 kB package, and two folders of 3 kB, are 9 kB
	const first, second = "_ray_pkg_1111111111111111.zip", "_ray_pkg_2222222222222222.zip"
	put := func(name string, seed uint64) response {
		return e.request("PUT", "/api/packages/gcs/"+name, incompressibleZip(t, 3000, seed), "Content-Type", "application/zip")
	}
	wantStatus(t, put(first, 1), http.StatusOK)
	env := map[string]any{"working_dir": "gcs://" + first}
	one := e.raySubmitJob(map[string]any{"entrypoint": "true", "runtime_env": env})

	full := e.request("POST", "/api/jobs/", jsonBody(t, map[string]any{"entrypoint": "true", "runtime_env": env}))
	wantStatus(t, full, http.StatusInsufficientStorage)
	if msg := errorMessage(t, full); !strings.Contains(msg, "upload quota is full") || !strings.Contains(msg, "delete ended jobs") {
		t.Errorf("Ray's refusal %q does not say that the quota is full and what to do", msg)
	}
	native := e.request("POST", "/api/v1/jobs", []byte(`{"workingDirPackage": "gcs://`+first+`", "job": `+trainJob("true")+`}`))
	wantStatus(t, native, http.StatusInsufficientStorage)
	if msg := errorMessage(t, native); !strings.Contains(msg, "upload quota is full") {
		t.Errorf("the native refusal %q does not say that the quota is full", msg)
	}
	if r := put(second, 2); r.status != http.StatusInsufficientStorage || !strings.Contains(errorMessage(t, r), "upload quota is full") {
		t.Errorf("an upload past the quota: %d %s, want 507", r.status, r.body)
	}
	if used := e.srv.quota.usedBytes(); used > 8000 {
		t.Errorf("the quota counts %d bytes after refusals, over its 8000", used)
	}

	e.rayWait(one, "SUCCEEDED")
	wantStatus(t, e.request("DELETE", "/api/jobs/"+one, nil), http.StatusOK)
	two := e.raySubmitJob(map[string]any{"entrypoint": "true", "runtime_env": env})
	e.rayWait(two, "SUCCEEDED")

	e.srv.quota.setClock(func() time.Time { return time.Now().Add(packageIdle + time.Minute) })
	wantStatus(t, put(second, 2), http.StatusOK) // the first package, idle, made room
	wantStatus(t, e.request("GET", "/api/packages/gcs/"+first, nil), http.StatusNotFound)

	again, err := newUploadQuota(8000, e.srv.cfg.Packages, filepath.Join(e.dir, "state", "workdirs"), e.srv.log)
	if err != nil {
		t.Fatal(err)
	}
	if again.used != e.srv.quota.usedBytes() {
		t.Errorf("a new server counts %d bytes, the running one %d", again.used, e.srv.quota.usedBytes())
	}
}
