package server

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/upload"
)

// submit answers POST /api/v1/jobs with the new job (201).
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	j, err := s.submitNative(w, r)
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	s.audit(r, actionSubmit, j)
	writeJSON(w, http.StatusCreated, toJob(j))
}

// submitNative reads, defaults, validates and submits a TrainJob.
func (s *Server) submitNative(w http.ResponseWriter, r *http.Request) (*store.Job, error) {
	data, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	req, err := decodeNative(r, data)
	if err != nil {
		return nil, err
	}
	id, err := newID(req.id, "id")
	if err != nil {
		return nil, err
	}
	var wd workdir // a git source's workers start in the run folder it is cloned into
	if _, git := jobspec.GitSource(&req.job.Spec); !git || req.job.Spec.WorkingDir != "" || req.pkg != "" {
		if wd, err = s.nativeWorkdir(id, req.job, req.pkg); err != nil {
			return nil, err
		}
	}
	j, err := s.admit(req.job, wd, jobs.Submission{ID: id, Priority: req.priority,
		SubmittedBy: submitter(r)})
	if err != nil {
		s.discardWorkdir(wd)
		return nil, nameTaken(err)
	}
	return j, nil
}

// nameTaken returns the refusal of a job whose name another job has, or err as it is.
func nameTaken(err error) error {
	var taken *store.NameTakenError
	if !errors.As(err, &taken) {
		return err
	}
	return refuse(store.ErrNameTaken, "a job named '%s' exists already (%s): names are unique among the server's jobs until "+
		"a job is deleted; choose another name, or delete that job first", taken.Name, strings.Join(taken.IDs, ", "))
}

// nativeJob returns the job that the path's {id} names: the job with that ID, or else the
// one with that name.
func (s *Server) nativeJob(r *http.Request) (*store.Job, error) {
	ref := r.PathValue("id")
	j, err := s.cfg.Jobs.Find(ref)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(store.ErrNotFound, "no job with id or name '%s' (trainyard list shows the jobs)", truncate(ref, 200))
	}
	return j, err
}

// nativeWorkdir returns the folder a TrainJob starts in: the uploaded package pkg
// unpacked into a folder of the job's own, its workingDir, which must be a folder on this
// machine, or an empty folder of the job's own.
func (s *Server) nativeWorkdir(id string, job *v1.TrainJob, pkg string) (workdir, error) {
	dir := job.Spec.WorkingDir
	if pkg != "" {
		return s.unpackNative(id, pkg, dir)
	}
	if dir == "" {
		return s.newWorkdir(id)
	}
	if rest, ok := strings.CutPrefix(dir, "~"); ok && (rest == "" || rest[0] == '/') {
		home, err := os.UserHomeDir()
		if err != nil {
			return workdir{}, err
		}
		dir = filepath.Join(home, rest)
	}
	if info, err := os.Stat(dir); !filepath.IsAbs(dir) || err != nil || !info.IsDir() {
		return workdir{}, invalid("spec.workingDir %q must be an absolute path of a folder on the server's machine", truncate(job.Spec.WorkingDir, 200))
	}
	return workdir{dir: filepath.Clean(dir)}, nil
}

// unpackNative unpacks the package that workingDirPackage names (gcs://<name>) into a
// folder of the job's own; dir, the job's spec.workingDir, must be empty.
func (s *Server) unpackNative(id, pkg, dir string) (workdir, error) {
	if dir != "" {
		return workdir{}, invalid("workingDirPackage and spec.workingDir %q are both set: the job starts in the unpacked package; drop spec.workingDir",
			truncate(dir, 200))
	}
	protocol, name, ok := strings.Cut(pkg, "://")
	if !ok || protocol != packageProtocol {
		return workdir{}, invalid("workingDirPackage %q: must name an uploaded package, %s://_ray_pkg_<hash>.zip", truncate(pkg, 200), packageProtocol)
	}
	if err := upload.ValidName(name); err != nil {
		return workdir{}, invalid("workingDirPackage: %v", err)
	}
	has, err := s.cfg.Packages.Has(name)
	if err != nil {
		return workdir{}, err
	}
	if !has {
		return workdir{}, invalid("package %s://%s does not exist: upload it first (PUT /api/packages/%s/%s)", packageProtocol, name, packageProtocol, name)
	}
	return s.unpack(id, name)
}

// list answers GET /api/v1/jobs, in submit order: ?status= (repeated or comma-separated)
// keeps the jobs in those statuses, ?limit= the first ones. For a page of a long list
// (the dashboard's): ?q= keeps the jobs whose ID, name, entrypoint, message or status
// holds every word, ?sort=newest|name|status orders them, ?offset= skips that many, and
// Total says how many there are before offset and limit.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	f, err := listFilter(r)
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	p, err := readPageQuery(r.URL.Query())
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	limit := f.Limit
	if p.paged() {
		f.Limit = 0 // search and order everything, then take the page
	}
	list, err := s.cfg.Jobs.List(f)
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	out := JobList{Total: len(list)}
	if limit > 0 && len(list) == limit && !p.paged() { // Total is every job the filter keeps
		if out.Total, err = s.cfg.Jobs.Count(f); err != nil {
			s.writeError(w, r, native, err)
			return
		}
	}
	if p.paged() {
		list = p.apply(list)
		out.Total = len(list)
		list = window(list, p.offset, limit)
	}
	out.Jobs = make([]Job, 0, len(list))
	for _, j := range list {
		out.Jobs = append(out.Jobs, toJob(j))
	}
	writeJSON(w, http.StatusOK, out)
}

// listFilter reads the query of GET /api/v1/jobs.
func listFilter(r *http.Request) (store.Filter, error) {
	var f store.Filter
	q := r.URL.Query()
	for _, v := range q["status"] {
		for _, name := range strings.Split(v, ",") {
			st := store.Status(strings.ToUpper(strings.TrimSpace(name)))
			if !st.Known() {
				return f, invalid("status %q: use PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED", truncate(name, 64))
			}
			f.Statuses = append(f.Statuses, st)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return f, invalid("limit %q: must be a whole number, 0 or more (0: no limit)", truncate(v, 64))
		}
		f.Limit = n
	}
	return f, nil
}

// get answers GET /api/v1/jobs/{id} with the job, its spec and what its run folder holds.
// Here and in the other /api/v1/jobs/{id} endpoints, {id} is a job's ID or name.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	j, err := s.nativeJob(r)
	var d JobDetail
	if err == nil {
		d, err = toDetail(j)
	}
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// stop answers POST /api/v1/jobs/{id}/stop with the job; an ended job is a 409.
func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	j, err := s.nativeJob(r)
	if err == nil {
		j, err = s.cfg.Jobs.Stop(j.ID)
	}
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	s.audit(r, actionStop, j)
	writeJSON(w, http.StatusOK, toJob(j))
}

// delete answers DELETE /api/v1/jobs/{id} with 204; a job not yet ended is a 409.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	j, err := s.nativeJob(r)
	if err == nil {
		err = s.deleteJob(j)
	}
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	s.audit(r, actionDelete, j)
	w.WriteHeader(http.StatusNoContent)
}

// logs answers GET /api/v1/jobs/{id}/logs as text: with ?rank=R, that rank's log of the
// last attempt, else the console log; ?tail=N keeps the last N lines. Like Ray's logs,
// a log is read from its last 16 MiB at most; ?whole=1 sends all of it, as it is now
// (a download), and takes no tail.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	path, tail, err := s.logFile(r)
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	if r.URL.Query().Get("whole") == "1" {
		if tail > 0 {
			s.writeError(w, r, native, invalid("whole=1 sends the whole log: leave out tail"))
			return
		}
		s.streamLog(w, r, path)
		return
	}
	if err := s.sendLogTail(w, path, tail); err != nil {
		s.writeError(w, r, native, err)
	}
}

// sendLogTail answers the log at path as text: its last maxLogBytes at most, and of
// those its last tail lines (0: all), read from the file as they are sent.
func (s *Server) sendLogTail(w http.ResponseWriter, path string, tail int) error {
	log, err := openLog(path)
	if err != nil {
		return err
	}
	defer log.Close()
	win, err := cutLog(log, log.size, maxLogBytes)
	if err == nil {
		win, err = win.lastLines(tail)
	}
	if err != nil {
		return err
	}
	s.writeLogText(w, win)
	return nil
}

// streamLog sends the file at path as it is now (its size when opened), or nothing when
// it does not exist yet.
func (s *Server) streamLog(w http.ResponseWriter, r *http.Request, path string) {
	log, err := openLog(path)
	if err != nil {
		s.writeError(w, r, native, err)
		return
	}
	defer log.Close()
	w.Header().Set("Content-Length", strconv.FormatInt(log.size, 10))
	s.writeLogText(w, logWindow{src: log, size: log.size})
}

// logFile finds the log that GET /api/v1/jobs/{id}/logs asks for, and the tail asked.
func (s *Server) logFile(r *http.Request) (path string, tail int, err error) {
	j, err := s.nativeJob(r)
	if err != nil {
		return "", 0, err
	}
	q := r.URL.Query()
	if tail, err = queryInt(q.Get("tail"), "tail"); err != nil {
		return "", 0, err
	}
	path = jobs.LogPath(j)
	if v := q.Get("rank"); v != "" {
		rank, err := queryInt(v, "rank")
		if err != nil {
			return "", 0, err
		}
		if path, err = rankLog(j, rank); err != nil {
			return "", 0, err
		}
	}
	return path, tail, nil
}

// queryInt reads a query parameter that must be 0 or more; "" is 0.
func queryInt(v, name string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, invalid("%s %q: must be a whole number, 0 or more", name, truncate(v, 64))
	}
	return n, nil
}

// rankLog returns the path of a rank's log in the job's last attempt.
func rankLog(j *store.Job, rank int) (string, error) {
	rec, err := rundir.ReadRecord(j.RunDir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(rec.Attempts) == 0) {
		return "", refuse(store.ErrNotFound, "job %s has not started an attempt yet, so rank %d has no log; read the console log (no rank)", j.ID, rank)
	}
	if err != nil {
		return "", err
	}
	last := rec.Attempts[len(rec.Attempts)-1]
	for _, rk := range last.Ranks {
		if rk.Rank == rank && filepath.IsAbs(rk.Log) {
			return rk.Log, nil
		}
		if rk.Rank == rank {
			return filepath.Join(j.RunDir, rk.Log), nil
		}
	}
	return "", refuse(store.ErrNotFound, "attempt %d of job %s has no rank %d; it has ranks 0 to %d", last.Number, j.ID, rank, len(last.Ranks)-1)
}
