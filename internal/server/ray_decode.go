package server

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// raySubmit is Ray's JobSubmitRequest (dashboard/modules/job/common.py), decoded and
// checked by decodeSubmit.
type raySubmit struct {
	// Entrypoint is the shell command to run; never blank.
	Entrypoint string
	// SubmissionID is submission_id, else the deprecated job_id; empty: generate one.
	SubmissionID string
	// RuntimeEnv is runtime_env as sent (nil when absent), kept for JobDetails.
	RuntimeEnv json.RawMessage
	// Env is what runtime_env asks of the job.
	Env runtimeEnv
	// Metadata is the client's metadata.
	Metadata map[string]string
	// NumCPUs, NumGPUs and MemoryBytes are what the entrypoint reserves; nil: nothing.
	NumCPUs     *float64
	NumGPUs     *int32
	MemoryBytes *int64

	legacyJobID string // job_id, used when submission_id is empty
}

// Bounds on a Ray submission's numbers, so that conversions cannot overflow.
const (
	maxRayCPUs = 1 << 20
	maxRayGPUs = 1024
)

// rayField decodes one field of a JobSubmitRequest into req.
type rayField func(req *raySubmit, raw json.RawMessage) error

// rayFields are the fields of Ray's JobSubmitRequest, each with its decoder. Ray builds
// its dataclass from the body, so any other key is a TypeError, answered 400.
var rayFields = map[string]rayField{
	"entrypoint":                decodeEntrypoint,
	"submission_id":             decodeSubmissionID,
	"job_id":                    decodeJobID,
	"runtime_env":               decodeRuntimeEnvField,
	"metadata":                  decodeMetadata,
	"entrypoint_num_cpus":       decodeNumCPUs,
	"entrypoint_num_gpus":       decodeNumGPUs,
	"entrypoint_memory":         decodeMemory,
	"entrypoint_resources":      decodeResources,
	"entrypoint_label_selector": decodeLabelSelector,
	"retry_policy":              decodeRetryPolicy,
}

// decodeSubmit decodes and checks the body of POST /api/jobs/. Like Ray, it drops the
// keys whose value is null first. Every error is a refusal of kind errInvalid.
func decodeSubmit(data []byte) (*raySubmit, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, invalid("the body must be a JSON object (Ray's JobSubmitRequest): %s", jsonProblem(err))
	}
	req := &raySubmit{}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		if string(raw) == "null" {
			continue
		}
		decode, ok := rayFields[name]
		if !ok {
			return nil, invalid("unknown field %q; a job submission has %s", name, strings.Join(slices.Sorted(maps.Keys(rayFields)), ", "))
		}
		if err := decode(req, raw); err != nil {
			return nil, err
		}
	}
	if req.Entrypoint == "" {
		return nil, invalid(`entrypoint is required: the shell command to run, e.g. "python train.py"`)
	}
	if req.SubmissionID == "" { // Ray takes `submission_id or job_id`
		req.SubmissionID = req.legacyJobID
	}
	return req, nil
}

func decodeEntrypoint(req *raySubmit, raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return invalid("entrypoint must be a string, got %s", jsonKind(raw))
	}
	switch {
	case strings.TrimSpace(s) == "":
		return invalid(`entrypoint is empty: give the shell command to run, e.g. "python train.py"`)
	case strings.ContainsRune(s, 0):
		return invalid("entrypoint holds a NUL byte, which no command line can")
	}
	req.Entrypoint = s
	return nil
}

func decodeSubmissionID(req *raySubmit, raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return invalid("submission_id must be a string, got %s", jsonKind(raw))
	}
	req.SubmissionID = s
	return nil
}

// decodeJobID reads the deprecated job_id, which Ray uses only without submission_id.
func decodeJobID(req *raySubmit, raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return invalid("job_id must be a string, got %s", jsonKind(raw))
	}
	req.legacyJobID = s
	return nil
}

func decodeRuntimeEnvField(req *raySubmit, raw json.RawMessage) error {
	env, err := parseRuntimeEnv(raw)
	if err != nil {
		return err
	}
	req.RuntimeEnv, req.Env = raw, env
	return nil
}

func decodeMetadata(req *raySubmit, raw json.RawMessage) error {
	var m map[string]string
	if json.Unmarshal(raw, &m) != nil {
		return invalid("metadata must be an object whose values are strings, got %s", jsonKind(raw))
	}
	req.Metadata = m
	return nil
}

func decodeNumCPUs(req *raySubmit, raw json.RawMessage) error {
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return invalid("entrypoint_num_cpus must be a number, got %s", jsonKind(raw))
	}
	if f < 0 || f > maxRayCPUs || math.IsNaN(f) {
		return invalid("entrypoint_num_cpus must be between 0 and %d, got %v", maxRayCPUs, f)
	}
	req.NumCPUs = &f
	return nil
}

func decodeNumGPUs(req *raySubmit, raw json.RawMessage) error {
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return invalid("entrypoint_num_gpus must be a number, got %s", jsonKind(raw))
	}
	if f < 0 || f > maxRayGPUs || math.IsNaN(f) {
		return invalid("entrypoint_num_gpus must be between 0 and %d, got %v", maxRayGPUs, f)
	}
	if f != math.Trunc(f) {
		return invalid("entrypoint_num_gpus must be a whole number here, got %v: trainyard gives a job whole GPUs and does not share one between jobs; ask for %v or %v",
			f, math.Floor(f), math.Ceil(f))
	}
	n := int32(f)
	req.NumGPUs = &n
	return nil
}

// decodeMemory reads entrypoint_memory, which Ray requires to be an integer (bytes).
func decodeMemory(req *raySubmit, raw json.RawMessage) error {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return invalid("entrypoint_memory must be an integer number of bytes, got %s", truncate(string(raw), 40))
	}
	if n < 0 {
		return invalid("entrypoint_memory must be 0 or more bytes, got %d", n)
	}
	req.MemoryBytes = &n
	return nil
}

// decodeResources reads entrypoint_resources: custom resources, which this machine has
// none of, so only an empty object is accepted.
func decodeResources(_ *raySubmit, raw json.RawMessage) error {
	var m map[string]float64
	if json.Unmarshal(raw, &m) != nil {
		return invalid("entrypoint_resources must be an object whose values are numbers, got %s", jsonKind(raw))
	}
	if len(m) > 0 {
		return invalid("entrypoint_resources is not supported: this server schedules whole GPUs, CPUs and memory; use entrypoint_num_gpus, entrypoint_num_cpus and entrypoint_memory")
	}
	return nil
}

// decodeLabelSelector reads entrypoint_label_selector: this server is one node, without
// labels, so only an empty selector is accepted.
func decodeLabelSelector(_ *raySubmit, raw json.RawMessage) error {
	var m map[string]string
	if json.Unmarshal(raw, &m) != nil {
		return invalid("entrypoint_label_selector must be an object whose values are strings, got %s", jsonKind(raw))
	}
	if len(m) > 0 {
		return invalid("entrypoint_label_selector is not supported: this server is a single machine without node labels")
	}
	return nil
}

// decodeRetryPolicy refuses retry_policy, which newer Ray clients send when asked to.
func decodeRetryPolicy(_ *raySubmit, raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return invalid("retry_policy must be an object, got %s", jsonKind(raw))
	}
	if len(m) > 0 {
		return invalid("retry_policy is not supported by the Ray Jobs API of this server; submit a TrainJob with maxRestarts to /api/v1/jobs instead")
	}
	return nil
}

// jsonKind names the JSON type of a raw value, for messages.
func jsonKind(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "nothing"
	}
	switch s[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// truncate shortens s to at most n bytes for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
