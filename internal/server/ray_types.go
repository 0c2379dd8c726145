package server

import (
	"encoding/json"
	"time"

	"github.com/trainyard/trainyard/internal/store"
)

// The versions /api/version reports. Ray's clients read ray_version and compare it with
// the Ray version that introduced a feature (2.2 for entrypoint_num_cpus/gpus, 2.8 for
// entrypoint_memory, 3.0 for retry_policy), so this is a Ray release whose Jobs API this
// server implements.
const (
	// rayAPIVersion is Ray's Jobs API version (dashboard/modules/version.py): 4 added
	// DELETE /api/jobs/{id}; 5 added a structured 503 for logs, which this server never
	// needs.
	rayAPIVersion = "4"
	// rayRelease is the Ray release whose Jobs API this server speaks.
	rayRelease = "2.49.0"
)

// rayVersionResponse is Ray's VersionResponse, with trainyard's own version beside it.
type rayVersionResponse struct {
	Version          string `json:"version"`
	RayVersion       string `json:"ray_version"`
	RayCommit        string `json:"ray_commit"`
	SessionName      string `json:"session_name"`
	TrainyardVersion string `json:"trainyard_version"`
}

// raySubmitResponse is Ray's JobSubmitResponse: both fields hold the submission ID.
type raySubmitResponse struct {
	JobID        string `json:"job_id"`
	SubmissionID string `json:"submission_id"`
}

// rayStopResponse is Ray's JobStopResponse.
type rayStopResponse struct {
	Stopped bool `json:"stopped"`
}

// rayDeleteResponse is Ray's JobDeleteResponse.
type rayDeleteResponse struct {
	Deleted bool `json:"deleted"`
}

// rayLogsResponse is Ray's JobLogsResponse.
type rayLogsResponse struct {
	Logs string `json:"logs"`
}

// rayJobDetails is Ray's JobDetails (dashboard/modules/job/pydantic_models.py), every
// field present as Ray's pydantic model writes it, null where unknown. job_id and
// driver_info describe a Ray driver, which a trainyard job does not have: both are null,
// as Ray's are before a job's driver starts.
type rayJobDetails struct {
	Type                   string            `json:"type"`
	JobID                  *string           `json:"job_id"`
	SubmissionID           string            `json:"submission_id"`
	DriverInfo             *struct{}         `json:"driver_info"`
	Status                 store.Status      `json:"status"`
	Entrypoint             string            `json:"entrypoint"`
	Message                string            `json:"message"`
	ErrorType              *string           `json:"error_type"`
	StartTime              *int64            `json:"start_time"`
	EndTime                *int64            `json:"end_time"`
	Metadata               map[string]string `json:"metadata"`
	RuntimeEnv             json.RawMessage   `json:"runtime_env"`
	DriverAgentHTTPAddress *string           `json:"driver_agent_http_address"`
	DriverNodeID           *string           `json:"driver_node_id"`
	DriverExitCode         *int              `json:"driver_exit_code"`
}

// rayErrorEntrypoint is the error_type Ray gives a job whose entrypoint exited non-zero.
const rayErrorEntrypoint = "JOB_ENTRYPOINT_COMMAND_ERROR"

// rayMessages are the messages Ray gives a status when it has none more specific
// (JobInfo.__post_init__ in dashboard/modules/job/common.py).
var rayMessages = map[store.Status]string{
	store.Pending:   "Job has not started yet.",
	store.Running:   "Job is currently running.",
	store.Stopped:   "Job was intentionally stopped.",
	store.Succeeded: "Job finished successfully.",
	store.Failed:    "Job failed.",
}

// toRayDetails converts a stored job to Ray's JobDetails; it reads nothing else, so that
// a list of every job costs no file reads. Like Ray, start_time is when the job was
// submitted, in ms.
func toRayDetails(j *store.Job) rayJobDetails {
	d := rayJobDetails{Type: "SUBMISSION", SubmissionID: j.ID, Status: j.Status, Entrypoint: j.Entrypoint,
		Message: j.Message, StartTime: millis(&j.SubmittedAt), EndTime: millis(j.EndedAt),
		Metadata: j.Metadata, RuntimeEnv: j.RuntimeEnv}
	if d.Message == "" || j.Status == store.Stopped {
		d.Message = rayMessages[j.Status]
	}
	if d.Metadata == nil {
		d.Metadata = map[string]string{}
	}
	if len(d.RuntimeEnv) == 0 {
		d.RuntimeEnv = json.RawMessage("{}")
	}
	if j.Status.Terminal() {
		d.DriverExitCode = j.ExitCode
	}
	if j.Status == store.Failed && d.DriverExitCode != nil && *d.DriverExitCode != 0 {
		t := rayErrorEntrypoint
		d.ErrorType = &t
	}
	return d
}

// millis returns t as a Unix timestamp in milliseconds, nil for nil.
func millis(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}
