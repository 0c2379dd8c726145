package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/auth"
)

// kubeRayClient restates how KubeRay's RayJob controller talks to Ray's dashboard
// (ray-operator/controllers/ray/utils/dashboardclient/dashboard_httpclient.go): the token
// in X-Ray-Authorization, few status checks, and bodies decoded into its own types. A
// response that KubeRay would misread fails these tests the way it fails KubeRay.
type kubeRayClient struct {
	url, token string
	client     *http.Client
}

// kubeRayJobInfo is KubeRay's RayJobInfo (utils/types/dashboard_httpclient.go).
type kubeRayJobInfo struct {
	ErrorType    *string           `json:"error_type,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	RuntimeEnv   map[string]any    `json:"runtime_env,omitempty"`
	JobStatus    string            `json:"status,omitempty"`
	Entrypoint   string            `json:"entrypoint,omitempty"`
	JobID        string            `json:"job_id,omitempty"`
	SubmissionID string            `json:"submission_id,omitempty"`
	Message      string            `json:"message,omitempty"`
	StartTime    uint64            `json:"start_time,omitempty"`
	EndTime      uint64            `json:"end_time,omitempty"`
}

// errKubeRayAlreadySubmitted is what KubeRay's SubmitJobReq reports for a 500 that says
// "Please use a different submission_id": its controller then carries on with that ID.
var errKubeRayAlreadySubmitted = errors.New("submission ID already used")

// do sends a request as KubeRay does, returning the status and the body.
func (c *kubeRayClient) do(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, c.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("x-ray-authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// getJobInfo is KubeRay's GetJobInfo: only 404 is checked; any other body is decoded as
// a RayJobInfo, and only a body that is not JSON of that shape is an error.
func (c *kubeRayClient) getJobInfo(t *testing.T, id string) (*kubeRayJobInfo, error) {
	status, body := c.do(t, http.MethodGet, "/api/jobs/"+id, nil)
	if status == http.StatusNotFound {
		return nil, fmt.Errorf("Job %s does not exist on the cluster", id)
	}
	var info kubeRayJobInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("GetJobInfo fail: %s", body)
	}
	return &info, nil
}

// submitJob is KubeRay's SubmitJobReq.
func (c *kubeRayClient) submitJob(t *testing.T, req map[string]any) (string, error) {
	status, body := c.do(t, http.MethodPost, "/api/jobs/", jsonBody(t, req))
	if status < 200 || status > 299 {
		if status == http.StatusInternalServerError && strings.Contains(string(body), "Please use a different submission_id") {
			return req["submission_id"].(string), errKubeRayAlreadySubmitted
		}
		return "", fmt.Errorf("SubmitJob fail: %d %s", status, body)
	}
	var resp struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return "", fmt.Errorf("SubmitJob fail: %s", body)
	}
	return resp.JobID, nil
}

// A restarted submitter (or controller) submits its submission_id again: KubeRay must see
// "already submitted", not a failure.
func TestKubeRaySubmitsTwice(t *testing.T) {
	e := newEnv(t)
	c := &kubeRayClient{url: e.web.URL, token: testToken, client: e.web.Client()}
	req := map[string]any{"entrypoint": "true", "submission_id": "rayjob-sample-abc12"}
	id, err := c.submitJob(t, req)
	if err != nil || id != "rayjob-sample-abc12" {
		t.Fatalf("first submission: %q, %v", id, err)
	}
	id, err = c.submitJob(t, req)
	if !errors.Is(err, errKubeRayAlreadySubmitted) || id != "rayjob-sample-abc12" {
		t.Fatalf("second submission: %q, %v; want KubeRay's \"already submitted\" with the ID", id, err)
	}
	info, err := c.getJobInfo(t, id)
	if err != nil || info.SubmissionID != id || info.JobStatus == "" {
		t.Fatalf("job info %+v, %v", info, err)
	}
}

// KubeRay decodes whatever it gets (but a 404) as a RayJobInfo: an error in JSON would be
// an empty job without error, so a wrong token looked like a job with no status. Ray's
// errors are text, which KubeRay reports.
func TestKubeRaySeesErrors(t *testing.T) {
	e := newEnv(t)
	id := e.raySubmitJob(map[string]any{"entrypoint": "true"})
	cases := map[string]struct {
		token  string
		status int
		body   string
	}{
		"wrong token":   {"not-the-token", http.StatusForbidden, auth.RayInvalidToken},
		"missing token": {"", http.StatusUnauthorized, auth.RayMissingToken},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &kubeRayClient{url: e.web.URL, token: tc.token, client: e.web.Client()}
			info, err := c.getJobInfo(t, id)
			if err == nil {
				t.Fatalf("KubeRay read the refusal as a job: %+v", info)
			}
			if want := "GetJobInfo fail: " + tc.body; err.Error() != want {
				t.Errorf("KubeRay's error %q, want %q", err, want)
			}
			req := mustRequest(t, http.MethodGet, e.web.URL+"/api/jobs/"+id)
			if tc.token != "" {
				req.Header.Set(auth.HeaderRayAuthorization, "Bearer "+tc.token)
			}
			r := e.do(req)
			wantStatus(t, r, tc.status)
			if msg := rayErrorMessage(t, r); msg != tc.body {
				t.Errorf("body %q, want Ray's %q", msg, tc.body)
			}
		})
	}
}
