package server

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
)

// nativeSubmit is a decoded POST /api/v1/jobs.
type nativeSubmit struct {
	id       string
	job      *v1.TrainJob
	priority int
	// pkg is the package the job starts in, as "gcs://<name>"; empty for none.
	pkg string
}

// yamlTypes are the media types of a TrainJob sent as YAML.
var yamlTypes = map[string]bool{"application/yaml": true, "application/x-yaml": true, "text/yaml": true, "text/x-yaml": true}

// decodeNative decodes the body of POST /api/v1/jobs: a SubmitRequest as JSON (the
// default), or the TrainJob itself as YAML with the ID and priority in the query. Both
// are strict: unknown fields are refused, naming them.
func decodeNative(r *http.Request, data []byte) (nativeSubmit, error) {
	ct := r.Header.Get("Content-Type")
	mt := "application/json"
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return nativeSubmit{}, refuse(errMediaType, "Content-Type %q: %v", truncate(ct, 100), err)
		}
	}
	switch {
	case mt == "application/json":
		return decodeNativeJSON(data)
	case yamlTypes[mt]:
		return decodeNativeYAML(r, data)
	}
	return nativeSubmit{}, refuse(errMediaType, "Content-Type %q: send application/json (a SubmitRequest) or application/yaml (a TrainJob)", truncate(mt, 100))
}

// decodeNativeJSON decodes a SubmitRequest; its job is parsed as a job file is.
func decodeNativeJSON(data []byte) (nativeSubmit, error) {
	var req struct {
		ID       string          `json:"id"`
		Job      json.RawMessage `json:"job"`
		Priority int             `json:"priority"`
		Package  string          `json:"workingDirPackage"`
	}
	if err := decodeStrict(data, &req); err != nil {
		return nativeSubmit{}, err
	}
	if len(req.Job) == 0 || string(req.Job) == "null" {
		return nativeSubmit{}, invalid(`job is required: the TrainJob to run, {"apiVersion": %q, "kind": %q, "spec": {...}}`, v1.APIVersion, v1.Kind)
	}
	job, err := jobspec.Parse(req.Job)
	if err != nil {
		return nativeSubmit{}, invalid("job: %v", err)
	}
	return nativeSubmit{id: req.ID, job: job, priority: req.Priority, pkg: req.Package}, nil
}

// decodeNativeYAML decodes a TrainJob file; ?id= and ?priority= give the rest.
func decodeNativeYAML(r *http.Request, data []byte) (nativeSubmit, error) {
	job, err := jobspec.Parse(data)
	if err != nil {
		return nativeSubmit{}, invalidBecause(err)
	}
	q := r.URL.Query()
	req := nativeSubmit{id: q.Get("id"), job: job}
	if v := q.Get("priority"); v != "" {
		if req.priority, err = strconv.Atoi(v); err != nil {
			return nativeSubmit{}, invalid("priority %q: must be a whole number", truncate(v, 64))
		}
	}
	return req, nil
}
