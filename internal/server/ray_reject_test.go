package server

import (
	"net/http"
	"strings"
	"testing"
)

// Bad submissions are refused with the right status and a one-line JSON error that says
// what to fix.
func TestRaySubmitRefuses(t *testing.T) {
	e := newEnv(t)
	cases := map[string]struct {
		body   string
		status int
		want   string // in the message
	}{
		"malformed JSON":             {`{"entrypoint": "true"`, 400, "must be a JSON object"},
		"not an object":              {`["echo hi"]`, 400, "must be a JSON object"},
		"empty body":                 {``, 400, "must be a JSON object"},
		"missing entrypoint":         {`{"runtime_env": {}}`, 400, "entrypoint is required"},
		"blank entrypoint":           {`{"entrypoint": "  "}`, 400, "entrypoint is empty"},
		"entrypoint not a string":    {`{"entrypoint": ["echo", "hi"]}`, 400, "entrypoint must be a string, got an array"},
		"unknown field":              {`{"entrypoint": "true", "entrypoint_num_tpus": 1}`, 400, `unknown field "entrypoint_num_tpus"`},
		"fractional GPUs":            {`{"entrypoint": "true", "entrypoint_num_gpus": 0.5}`, 400, "entrypoint_num_gpus must be a whole number here, got 0.5"},
		"negative CPUs":              {`{"entrypoint": "true", "entrypoint_num_cpus": -1}`, 400, "entrypoint_num_cpus must be between 0"},
		"memory not an integer":      {`{"entrypoint": "true", "entrypoint_memory": 1.5e9}`, 400, "entrypoint_memory must be an integer"},
		"metadata not strings":       {`{"entrypoint": "true", "metadata": {"n": 1}}`, 400, "metadata must be an object whose values are strings"},
		"custom resources":           {`{"entrypoint": "true", "entrypoint_resources": {"TPU": 1}}`, 400, "entrypoint_resources is not supported"},
		"label selector":             {`{"entrypoint": "true", "entrypoint_label_selector": {"zone": "a"}}`, 400, "entrypoint_label_selector is not supported"},
		"retry policy":               {`{"entrypoint": "true", "retry_policy": {"max_retries": 3}}`, 400, "retry_policy is not supported"},
		"runtime_env pip":            {`{"entrypoint": "true", "runtime_env": {"pip": ["torch"]}}`, 400, "runtime_env.pip is not supported: install packages in the image"},
		"runtime_env conda":          {`{"entrypoint": "true", "runtime_env": {"conda": "env.yaml"}}`, 400, "runtime_env.conda is not supported"},
		"runtime_env container":      {`{"entrypoint": "true", "runtime_env": {"container": {"image": "x"}}}`, 400, "runtime_env.container is not supported"},
		"runtime_env uv":             {`{"entrypoint": "true", "runtime_env": {"uv": ["torch"]}}`, 400, "runtime_env.uv is not supported: install packages in the image"},
		"runtime_env image_uri":      {`{"entrypoint": "true", "runtime_env": {"image_uri": "x"}}`, 400, "runtime_env.image_uri is not supported: run trainyard in the image instead"},
		"https working_dir":          {`{"entrypoint": "true", "runtime_env": {"working_dir": "https://example.com/code.zip"}}`, 400, "only packages uploaded to this server"},
		"runtime_env py_modules":     {`{"entrypoint": "true", "runtime_env": {"py_modules": ["gcs://_ray_pkg_a.zip"]}}`, 400, "runtime_env.py_modules is not supported"},
		"runtime_env unknown key":    {`{"entrypoint": "true", "runtime_env": {"nsight": "default"}}`, 400, "runtime_env.nsight is not supported"},
		"runtime_env not object":     {`{"entrypoint": "true", "runtime_env": "pip"}`, 400, "runtime_env must be an object"},
		"bad env var name":           {`{"entrypoint": "true", "runtime_env": {"env_vars": {"1X": "y"}}}`, 400, `"1X" is not a variable name`},
		"env var not a string":       {`{"entrypoint": "true", "runtime_env": {"env_vars": {"X": 1}}}`, 400, "env_vars must be an object whose values are strings"},
		"relative working_dir":       {`{"entrypoint": "true", "runtime_env": {"working_dir": "./src"}}`, 400, "must be an absolute folder"},
		"missing working_dir":        {`{"entrypoint": "true", "runtime_env": {"working_dir": "/no/such/folder"}}`, 400, "is not a folder"},
		"remote working_dir":         {`{"entrypoint": "true", "runtime_env": {"working_dir": "s3://bucket/code.zip"}}`, 400, "only packages uploaded to this server"},
		"package not uploaded":       {`{"entrypoint": "true", "runtime_env": {"working_dir": "gcs://_ray_pkg_0123.zip"}}`, 400, "was not uploaded; PUT it to /api/packages/gcs/_ray_pkg_0123.zip"},
		"bad package name":           {`{"entrypoint": "true", "runtime_env": {"working_dir": "gcs://../x.zip"}}`, 400, "invalid package name"},
		"submission_id not a string": {`{"entrypoint": "true", "submission_id": 7}`, 400, "submission_id must be a string, got a number"},
		"never fits GPUs":            {`{"entrypoint": "true", "entrypoint_num_gpus": 1}`, 400, "the job can never run on this machine: the job needs 1 GPU"},
		"never fits CPUs":            {`{"entrypoint": "true", "entrypoint_num_cpus": 3}`, 400, "needs 3 CPUs"},
		"oversized body":             {`{"entrypoint": "` + strings.Repeat("x", MaxBodyBytes) + `"}`, 413, "at most 1048576"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := e.request("POST", "/api/jobs/", []byte(c.body))
			if r.status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.status, c.status, r.body)
			}
			if msg := errorMessage(t, r); !strings.Contains(msg, c.want) {
				t.Errorf("message %q, want it to contain %q", msg, c.want)
			}
		})
	}
	if r := e.request("GET", "/api/jobs/", nil); string(r.body) != "[]\n" {
		t.Errorf("refused submissions left jobs: %s", r.body)
	}
}

// A body sent without Content-Length is cut at the limit too.
func TestRaySubmitOversizedChunkedBody(t *testing.T) {
	e := newEnv(t)
	body := strings.NewReader(`{"entrypoint": "` + strings.Repeat("x", MaxBodyBytes) + `"}`)
	req, err := http.NewRequest("POST", e.web.URL+"/api/jobs/", struct{ *strings.Reader }{body})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	r := e.do(req)
	wantStatus(t, r, http.StatusRequestEntityTooLarge)
	errorMessage(t, r)
}
