package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/pause"
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

// ListOptions choose a page of the job list.
type ListOptions struct {
	// Statuses keeps the jobs in these statuses; none keeps all.
	Statuses []JobStatus
	// Search keeps the jobs whose ID, name, entrypoint, message or status holds every word.
	Search string
	// Sort is "newest", "name" or "status"; "" is submit order.
	Sort string
	// Offset skips that many jobs; Limit keeps that many (0: all).
	Offset, Limit int
}

// ListPage returns a page of the job list and how many jobs match in all (JobList.Total).
func (c *Client) ListPage(ctx context.Context, opts ListOptions) (JobList, error) {
	q := url.Values{}
	if len(opts.Statuses) > 0 {
		names := make([]string, len(opts.Statuses))
		for i, s := range opts.Statuses {
			names[i] = string(s)
		}
		q.Set("status", strings.Join(names, ","))
	}
	set := func(k, v string) {
		if v != "" && v != "0" {
			q.Set(k, v)
		}
	}
	set("q", opts.Search)
	set("sort", opts.Sort)
	set("limit", strconv.Itoa(opts.Limit))
	q.Set("offset", strconv.Itoa(opts.Offset)) // a page: Total counts every match
	var list JobList
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/jobs", query: q, want: http.StatusOK}, &list)
	return list, err
}

// Get returns a job with its spec and what its run folder holds. Here and in Stop,
// Delete, Logs and Follow, ref is a job's ID or its name: the server looks up the job
// with that ID, or else the one with that name (a 404 APIError for neither, a 409 for a
// name that several jobs have, which lists their IDs).
func (c *Client) Get(ctx context.Context, ref string) (JobDetail, error) {
	var d JobDetail
	path, err := jobPath(ref, "")
	if err == nil {
		err = c.do(ctx, request{method: http.MethodGet, path: path, want: http.StatusOK}, &d)
	}
	return d, err
}

// Stop stops a job: a pending one at once, a running one once its gang has stopped
// (within its grace period). It returns the job as the server has it after the request:
// STOPPED, or RUNNING with StopRequested set. Stopping an ended job is refused (409).
func (c *Client) Stop(ctx context.Context, ref string) (Job, error) {
	var j Job
	path, err := jobPath(ref, "/stop")
	if err == nil {
		err = c.do(ctx, request{method: http.MethodPost, path: path, want: http.StatusOK}, &j)
	}
	return j, err
}

// Delete removes an ended job from the server; its run folder (logs, results,
// checkpoints) stays. Deleting a job that has not ended is refused (409).
func (c *Client) Delete(ctx context.Context, ref string) error {
	path, err := jobPath(ref, "")
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: path, want: http.StatusNoContent}, nil)
}

// ResultOptions choose which of a job's results to read.
type ResultOptions struct {
	// After keeps the results of iterations after After.
	After int
	// Max thins the results to at most Max (always keeping the last); 0 is the server's
	// default (5,000).
	Max int
}

// Results returns a job's reported results, in order.
func (c *Client) Results(ctx context.Context, ref string, opts ResultOptions) (ResultList, error) {
	path, err := jobPath(ref, "/results")
	if err != nil {
		return ResultList{}, err
	}
	q := url.Values{}
	if opts.After > 0 {
		q.Set("after", strconv.Itoa(opts.After))
	}
	if opts.Max > 0 {
		q.Set("max", strconv.Itoa(opts.Max))
	}
	var out ResultList
	err = c.do(ctx, request{method: http.MethodGet, path: path, query: q, want: http.StatusOK}, &out)
	return out, err
}

// Checkpoints returns every checkpoint a job committed, kept or since deleted.
func (c *Client) Checkpoints(ctx context.Context, ref string) (Checkpoints, error) {
	path, err := jobPath(ref, "/checkpoints")
	if err != nil {
		return Checkpoints{}, err
	}
	var out Checkpoints
	err = c.do(ctx, request{method: http.MethodGet, path: path, want: http.StatusOK}, &out)
	return out, err
}

// Node returns what the server's machine offers to jobs and what running jobs hold.
func (c *Client) Node(ctx context.Context) (Node, error) {
	var n Node
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/node", want: http.StatusOK}, &n)
	return n, err
}

// WaitStarted waits while the job that ref names is pending, and returns it once it is
// not: running, or ended without starting (stopped, say). Each time the reason it waits
// changes (the scheduler's, such as "needs 2 GPUs, 1 free"), it calls waiting with the
// job, if waiting is not nil; a job that is not pending returns at once without a call.
// The job is read again every 100 ms at first, then less often, up to the client's poll
// interval (a second by default). It returns ctx's error when ctx ends.
func (c *Client) WaitStarted(ctx context.Context, ref string, waiting func(Job)) (Job, error) {
	told := ""
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, max(c.poll, 100*time.Millisecond)) {
		d, err := c.Get(ctx, ref)
		if err != nil {
			return Job{}, err
		}
		j := d.Job
		if j.Status != StatusPending {
			return j, nil
		}
		if j.Message != "" && j.Message != told && waiting != nil {
			waiting(j)
		}
		if j.Message != "" {
			told = j.Message
		}
		ref = j.ID // the name may be another job's once this one is deleted
		if err := pause.For(ctx, delay); err != nil {
			return j, err
		}
	}
}

// jobPath returns the escaped path of a job's endpoint: /api/v1/jobs/{ref}, then suffix.
func jobPath(ref, suffix string) (string, error) {
	if strings.TrimSpace(ref) == "" {
		return "", errors.New("no job ID or name given")
	}
	return "/api/v1/jobs/" + url.PathEscape(ref) + suffix, nil
}
