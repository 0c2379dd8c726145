package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/trainyard/trainyard/internal/server"
)

// ServerVersion is the answer of GET /api/version: Ray's version fields and trainyard's
// own version.
type ServerVersion struct {
	// APIVersion is the version of Ray's Jobs API the server speaks.
	APIVersion string `json:"version"`
	// RayVersion is the Ray release whose API the server follows.
	RayVersion string `json:"ray_version"`
	// Trainyard is the server's trainyard version.
	Trainyard string `json:"trainyard_version"`
}

// Version asks the server for its version.
func (c *Client) Version(ctx context.Context) (ServerVersion, error) {
	var v ServerVersion
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/version", want: http.StatusOK}, &v)
	return v, err
}

// Submit submits a job and returns it as the server keeps it, PENDING. The job's
// workingDir, if any, is a folder on the server's machine (or leave it empty and name a
// package uploaded with UploadPackage in WorkingDirPackage); the server refuses a job
// that can never fit on its machine (400) and an ID in use (409).
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (Job, error) {
	if req.Job == nil {
		return Job{}, errors.New("submit: no job")
	}
	var j Job
	err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/jobs", body: req, want: http.StatusCreated}, &j)
	return j, err
}

// List returns the server's jobs in submit order; with statuses, only the jobs in one of
// them.
func (c *Client) List(ctx context.Context, status ...JobStatus) ([]Job, error) {
	q := url.Values{}
	if len(status) > 0 {
		names := make([]string, len(status))
		for i, s := range status {
			names[i] = string(s)
		}
		q.Set("status", strings.Join(names, ","))
	}
	var list server.JobList
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/jobs", query: q, want: http.StatusOK}, &list)
	return list.Jobs, err
}

// Get returns a job with its spec and what its run folder holds.
func (c *Client) Get(ctx context.Context, id string) (JobDetail, error) {
	var d JobDetail
	path, err := jobPath(id, "")
	if err == nil {
		err = c.do(ctx, request{method: http.MethodGet, path: path, want: http.StatusOK}, &d)
	}
	return d, err
}

// Stop stops a job: a pending one at once, a running one once its gang has stopped
// (within its grace period). It returns the job as the server has it after the request:
// STOPPED, or RUNNING with StopRequested set. Stopping an ended job is refused (409).
func (c *Client) Stop(ctx context.Context, id string) (Job, error) {
	var j Job
	path, err := jobPath(id, "/stop")
	if err == nil {
		err = c.do(ctx, request{method: http.MethodPost, path: path, want: http.StatusOK}, &j)
	}
	return j, err
}

// Delete removes an ended job from the server; its run folder (logs, results,
// checkpoints) stays. Deleting a job that has not ended is refused (409).
func (c *Client) Delete(ctx context.Context, id string) error {
	path, err := jobPath(id, "")
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: path, want: http.StatusNoContent}, nil)
}

// Node returns what the server's machine offers to jobs and what running jobs hold.
func (c *Client) Node(ctx context.Context) (Node, error) {
	var n Node
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/node", want: http.StatusOK}, &n)
	return n, err
}

// jobPath returns the escaped path of a job's endpoint: /api/v1/jobs/{id}, then suffix.
func jobPath(id, suffix string) (string, error) {
	if strings.TrimSpace(id) == "" {
		return "", errors.New("no job ID given")
	}
	return "/api/v1/jobs/" + url.PathEscape(id) + suffix, nil
}
