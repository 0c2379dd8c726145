package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
)

// rayVersion answers GET /api/version.
func (s *Server) rayVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, rayVersionResponse{Version: rayAPIVersion, RayVersion: rayRelease,
		RayCommit: "trainyard-" + s.cfg.Version, SessionName: "trainyard", TrainyardVersion: s.cfg.Version})
}

// raySubmit answers POST /api/jobs/: Ray's JobSubmitRequest becomes a TrainJob of one
// worker running the entrypoint with /bin/sh.
func (s *Server) raySubmit(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(w, r)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	req, err := decodeSubmit(data)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	j, err := s.submitRay(req, submitter(r))
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	s.audit(r, actionSubmit, j)
	writeJSON(w, http.StatusOK, raySubmitResponse{JobID: j.ID, SubmissionID: j.ID})
}

// submitRay submits a decoded Ray submission.
func (s *Server) submitRay(req *raySubmit, who string) (*store.Job, error) {
	id, err := newRayID(req.SubmissionID)
	if err != nil {
		return nil, err
	}
	// Refuse a duplicate before unpacking anything; Submit refuses a concurrent one.
	if _, err := s.cfg.Jobs.Get(id); err == nil {
		return nil, rayDuplicate(id)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("look up job %s: %w", id, err)
	}
	wd, err := s.prepareWorkdir(id, req.Env)
	if err != nil {
		return nil, err
	}
	j, err := s.admit(rayTrainJob(req), wd, jobs.Submission{ID: id, Entrypoint: req.Entrypoint, SubmittedBy: who,
		Metadata: req.Metadata, RuntimeEnv: req.RuntimeEnv})
	if err != nil {
		s.discardWorkdir(wd)
		if errors.Is(err, store.ErrExists) {
			return nil, rayDuplicate(id)
		}
		return nil, err
	}
	return j, nil
}

// rayDuplicate refuses a submission_id in use with Ray's own message, which KubeRay's
// client looks for.
func rayDuplicate(id string) error {
	return refuse(store.ErrExists, "Job with submission_id %s already exists. Please use a different submission_id.", id)
}

// rayList answers GET /api/jobs/ with every job's JobDetails, in submit order.
func (s *Server) rayList(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Jobs.List(store.Filter{})
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	out := make([]rayJobDetails, 0, len(list))
	for _, j := range list {
		out = append(out, toRayDetails(j))
	}
	writeJSON(w, http.StatusOK, out)
}

// rayGet answers GET /api/jobs/{id} with the job's JobDetails.
func (s *Server) rayGet(w http.ResponseWriter, r *http.Request) {
	j, err := s.rayJob(r)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	writeJSON(w, http.StatusOK, toRayDetails(withExitCode(j)))
}

// rayStop answers POST /api/jobs/{id}/stop: {"stopped": true} when the job was pending
// or running, false when it had already ended, as Ray answers.
func (s *Server) rayStop(w http.ResponseWriter, r *http.Request) {
	j, err := s.rayJob(r)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	_, err = s.cfg.Jobs.Stop(j.ID)
	switch {
	case errors.Is(err, jobs.ErrFinished):
		writeJSON(w, http.StatusOK, rayStopResponse{Stopped: false})
	case err != nil:
		s.writeError(w, r, ray, err)
	default:
		s.audit(r, actionStop, j)
		writeJSON(w, http.StatusOK, rayStopResponse{Stopped: true})
	}
}

// rayDelete answers DELETE /api/jobs/{id}. A job that has not ended is refused with
// Ray's status, 500, and Ray's message.
func (s *Server) rayDelete(w http.ResponseWriter, r *http.Request) {
	j, err := s.rayJob(r)
	if err == nil {
		err = s.deleteJob(j)
	}
	if errors.Is(err, jobs.ErrNotFinished) {
		err = &refusal{kind: jobs.ErrNotFinished, cause: err, msg: fmt.Sprintf(
			"Attempted to delete job '%s', but it is in a non-terminal state %s. Stop it first: POST /api/jobs/%s/stop", j.ID, j.Status, j.ID)}
	}
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	s.audit(r, actionDelete, j)
	writeJSON(w, http.StatusOK, rayDeleteResponse{Deleted: true})
}

// rayLogs answers GET /api/jobs/{id}/logs with the driver's raw output (ray_logs.go),
// its last 16 MiB at most, as Ray's log client reads, streamed from the files.
func (s *Server) rayLogs(w http.ResponseWriter, r *http.Request) {
	j, err := s.rayJob(r)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	log, err := openDriverLog(j.RunDir)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	defer log.Close()
	win, err := cutLog(log, log.size, maxLogBytes)
	if err != nil {
		s.writeError(w, r, ray, err)
		return
	}
	s.writeLogJSON(w, win)
}

// rayJob returns the job the request's path names, or Ray's "does not exist".
func (s *Server) rayJob(r *http.Request) (*store.Job, error) {
	id := r.PathValue("id")
	j, err := s.cfg.Jobs.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(store.ErrNotFound, "Job %s does not exist", truncate(id, 200))
	}
	return j, err
}

// deleteJob deletes an ended job and the working folder made for it.
func (s *Server) deleteJob(j *store.Job) error {
	if err := s.cfg.Jobs.Delete(j.ID); err != nil {
		return err
	}
	s.removeWorkdir(j)
	return nil
}

// withExitCode fills in the exit code of an ended job whose record lacks it (it ended
// before the store recorded exit codes) from its run record.
func withExitCode(j *store.Job) *store.Job {
	if j.ExitCode == nil {
		if rec := finishedRecord(j); rec != nil {
			j.ExitCode = rec.DriverExitCode()
		}
	}
	return j
}

// finishedRecord returns the run record of an ended job, or nil.
func finishedRecord(j *store.Job) *rundir.Record {
	if !j.Status.Terminal() || j.RunDir == "" {
		return nil
	}
	rec, err := rundir.ReadRecord(j.RunDir)
	if err != nil {
		return nil
	}
	return &rec
}
