package server

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/upload"
)

func ptr[T any](v T) *T { return &v }

func TestDecodeSubmit(t *testing.T) {
	cases := map[string]struct {
		body string
		want *raySubmit
	}{
		"entrypoint only": {`{"entrypoint": "python train.py"}`, &raySubmit{Entrypoint: "python train.py"}},
		"what Ray's SDK sends": {
			`{"entrypoint": "python t.py", "submission_id": "s1", "runtime_env": {"working_dir": "gcs://_ray_pkg_ab.zip", "env_vars": {"A": "1"}},
			  "metadata": {"k": "v"}, "entrypoint_num_cpus": 1.5, "entrypoint_num_gpus": 2, "entrypoint_memory": 1073741824,
			  "entrypoint_resources": {}}`,
			&raySubmit{Entrypoint: "python t.py", SubmissionID: "s1",
				RuntimeEnv: json.RawMessage(`{"working_dir": "gcs://_ray_pkg_ab.zip", "env_vars": {"A": "1"}}`),
				Env:        runtimeEnv{WorkingDir: "gcs://_ray_pkg_ab.zip", PackageName: "_ray_pkg_ab.zip", EnvVars: map[string]string{"A": "1"}},
				Metadata:   map[string]string{"k": "v"}, NumCPUs: ptr(1.5), NumGPUs: ptr(int32(2)), MemoryBytes: ptr(int64(1 << 30))},
		},
		"job_id when no submission_id": {`{"entrypoint": "x", "job_id": "old"}`, &raySubmit{Entrypoint: "x", SubmissionID: "old", legacyJobID: "old"}},
		"submission_id wins":           {`{"entrypoint": "x", "job_id": "old", "submission_id": "new"}`, &raySubmit{Entrypoint: "x", SubmissionID: "new", legacyJobID: "old"}},
		"nulls ignored":                {`{"entrypoint": "x", "runtime_env": null, "metadata": null}`, &raySubmit{Entrypoint: "x"}},
		"whole GPUs as a float":        {`{"entrypoint": "x", "entrypoint_num_gpus": 1.0}`, &raySubmit{Entrypoint: "x", NumGPUs: ptr(int32(1))}},
		"local working_dir":            {`{"entrypoint": "x", "runtime_env": {"working_dir": "/data/../code/"}}`, &raySubmit{Entrypoint: "x", RuntimeEnv: json.RawMessage(`{"working_dir": "/data/../code/"}`), Env: runtimeEnv{WorkingDir: "/code"}}},
		"ignored runtime_env keys":     {`{"entrypoint": "x", "runtime_env": {"excludes": ["*.pt"], "config": {"setup_timeout_seconds": 60}, "pip": null}}`, &raySubmit{Entrypoint: "x", RuntimeEnv: json.RawMessage(`{"excludes": ["*.pt"], "config": {"setup_timeout_seconds": 60}, "pip": null}`)}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := decodeSubmit([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(raySubmit{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Every refusal of the decoder is a 400 with a message on one line.
func TestDecodeSubmitRefusals(t *testing.T) {
	for _, body := range []string{`nope`, `{"entrypoint": 1}`, `{"entrypoint": "x", "entrypoint_num_gpus": 1.5}`,
		`{"entrypoint": "x", "entrypoint_num_gpus": 2000}`, `{"entrypoint": "x", "runtime_env": {"uv": ["x"]}}`,
		`{"entrypoint": "x", "entrypoint_memory": -1}`, `{"entrypoint": "a\u0000b"}`, `{"x": 1}`} {
		_, err := decodeSubmit([]byte(body))
		if !errors.Is(err, errInvalid) || statusOf(err, ray) != http.StatusBadRequest || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line refusal answered 400", body, err)
		}
	}
}

// FuzzDecodeSubmit feeds the Ray submit decoder arbitrary bodies: it never panics, it
// refuses with errInvalid, and what it accepts converts to a TrainJob that jobspec
// accepts or refuses without panicking.
func FuzzDecodeSubmit(f *testing.F) {
	for _, seed := range []string{`{"entrypoint": "echo hi"}`, `{"entrypoint": "x", "entrypoint_num_gpus": 0.5}`,
		`{"entrypoint": "x", "runtime_env": {"working_dir": "gcs://_ray_pkg_a.zip", "env_vars": {"A": "b"}}}`,
		`{"entrypoint": "x", "entrypoint_memory": 1e3}`, `[]`, `null`, `{"entrypoint": null}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeSubmit(body)
		if err != nil {
			if !errors.Is(err, errInvalid) {
				t.Fatalf("refusal %v is not errInvalid", err)
			}
			return
		}
		if strings.TrimSpace(req.Entrypoint) == "" {
			t.Fatalf("accepted a blank entrypoint: %q", body)
		}
		if req.NumGPUs != nil && (*req.NumGPUs < 0 || *req.NumGPUs > maxRayGPUs) {
			t.Fatalf("accepted %d GPUs", *req.NumGPUs)
		}
		if req.NumCPUs != nil && (*req.NumCPUs < 0 || math.IsInf(*req.NumCPUs, 0) || math.IsNaN(*req.NumCPUs)) {
			t.Fatalf("accepted %v CPUs", *req.NumCPUs)
		}
		job := rayTrainJob(req)
		job.Spec.RunName, job.Spec.StoragePath = "fuzz", "/tmp/runs"
		if jobspec.Default(job, jobspec.Env{WorkDir: "/tmp", Home: "/home/fuzz"}) == nil {
			_ = jobspec.Validate(job)
		}
	})
}

// The one table: each domain error gets its status, on each API.
func TestStatusOf(t *testing.T) {
	cases := map[string]struct {
		err                     error
		nativeStatus, rayStatus int
	}{
		"not found":         {store.ErrNotFound, 404, 404},
		"duplicate":         {refuse(store.ErrExists, "x"), 409, 500},
		"delete running":    {jobs.ErrNotFinished, 409, 500},
		"stop ended":        {jobs.ErrFinished, 409, 409},
		"never fits":        {jobs.ErrNeverFits, 400, 400},
		"spec too large":    {jobs.ErrSpecTooLarge, 400, 400},
		"invalid":           {invalid("x"), 400, 400},
		"invalid job":       {invalidBecause(&jobspec.Invalid{}), 400, 400},
		"body too large":    {tooLarge(-1), 413, 413},
		"body too slow":     {refuse(errSlowBody, "x"), 408, 408},
		"package large":     {upload.ErrTooLarge, 413, 413},
		"package name":      {upload.ErrInvalidName, 400, 400},
		"package archive":   {upload.ErrBadArchive, 400, 400},
		"no package":        {errNoPackage, 404, 404},
		"media type":        {errMediaType, 415, 415},
		"anything else":     {errors.New("disk on fire"), 500, 500},
		"wrapped not found": {errors.Join(errors.New("get"), store.ErrNotFound), 404, 404},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := []int{statusOf(c.err, native), statusOf(c.err, ray)}
			if diff := cmp.Diff([]int{c.nativeStatus, c.rayStatus}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLastLines(t *testing.T) {
	cases := map[string]struct {
		text string
		n    int
		want string
	}{
		"all":                 {"a\nb\n", 0, "a\nb\n"},
		"last one":            {"a\nb\nc\n", 1, "c\n"},
		"last two":            {"a\nb\nc\n", 2, "b\nc\n"},
		"more than there are": {"a\nb\n", 5, "a\nb\n"},
		"no final newline":    {"a\nb", 1, "b"},
		"empty":               {"", 3, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, logstream.LastLines(c.text, c.n)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A log over the limit is cut to its tail from a line start, after a line saying so.
func TestReadLogTail(t *testing.T) {
	path := t.TempDir() + "/console.log"
	writeFile(t, path, "first line\nsecond line\nthird\n")
	cases := map[string]struct {
		limit int64
		want  string
	}{
		"whole":     {1 << 20, "first line\nsecond line\nthird\n"},
		"truncated": {16, "[LOG TRUNCATED — showing last 0.0 MiB of 0.0 MiB total]\nthird\n"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := readLogTail(t, path, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got, err := readLogTail(t, path+".missing", 10); err != nil || got != "" {
		t.Errorf("a missing log: %q, %v; want empty", got, err)
	}
}
