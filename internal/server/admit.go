package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gitsource"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/launcher"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
	"github.com/trainyard/trainyard/internal/upload"
)

// jobID is what a job's ID may be in the native API.
var jobID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// maxRayIDBytes bounds a Ray submission_id, which Ray takes of any length; the store's
// keys hold at most 32 KiB.
const maxRayIDBytes = 16 << 10

// newRayID returns a Ray submission's ID: any string that can be one segment of a URL's
// path, as Ray takes (its folders are named by jobs.FolderName), or a new one when it is
// empty. "." and ".." are dropped from paths by clients and servers, and Ray's clients
// put the ID in the path unescaped, so an ID with "/" would name something else: no URL
// could name such a job again, to read its status, stop it or delete it.
func newRayID(id string) (string, error) {
	switch {
	case id == "":
		return jobs.NewID(), nil
	case len(id) > maxRayIDBytes:
		return "", invalid("submission_id is %d bytes long; this server keeps IDs of at most %d bytes", len(id), maxRayIDBytes)
	case id == "." || id == ".." || strings.Contains(id, "/"):
		return "", invalid("submission_id %q: no URL could name the job again (\".\" and \"..\" are dropped from paths, "+
			"and \"/\" splits them); give an ID without \"/\" that is not \".\" or \"..\", such as raysubmit_fPOmfwdHK5QGnJKC, "+
			"or none for a new one", truncate(id, 200))
	}
	return id, nil
}

// newID returns id, or a new one when it is empty, and refuses an ID that cannot name a
// run folder; field names the request field that holds it.
func newID(id, field string) (string, error) {
	if id == "" {
		return jobs.NewID(), nil
	}
	if !jobID.MatchString(id) {
		return "", invalid("%s %q: must start with a letter or digit and hold only letters, digits, '.', '_' and '-' (at most 128)",
			field, truncate(id, 200))
	}
	return id, nil
}

// workdir is the folder a job starts in. When the server made it for the job (under
// StateDir/workdirs), top is the folder to remove with the job.
type workdir struct {
	top, dir string
}

// discardWorkdir removes the folder the server made for a job that was not submitted,
// if it made one, and gives back what it held in the upload quota.
func (s *Server) discardWorkdir(w workdir) {
	if w.top != "" {
		_ = os.RemoveAll(w.top)
		s.quota.forgetFolder(w.top)
	}
}

// newWorkdir makes an empty folder of the job's own under StateDir/workdirs.
func (s *Server) newWorkdir(id string) (workdir, error) {
	top, err := os.MkdirTemp(s.workdirs, jobs.FolderName(id)+"-")
	if err != nil {
		return workdir{}, fmt.Errorf("create the job's working folder: %w", err)
	}
	return workdir{top: top, dir: top}, nil
}

// prepareWorkdir returns the folder a Ray job starts in: a folder of this machine that
// runtime_env names, the uploaded package it names unpacked into a folder of the job's
// own, or else an empty folder of the job's own.
func (s *Server) prepareWorkdir(id string, env runtimeEnv) (workdir, error) {
	switch {
	case env.PackageName != "":
		return s.unpack(id, env.PackageName)
	case env.WorkingDir != "":
		info, err := os.Stat(env.WorkingDir)
		if err != nil || !info.IsDir() {
			return workdir{}, invalid("runtime_env.working_dir %s is not a folder on the server's machine", env.WorkingDir)
		}
		return workdir{dir: env.WorkingDir}, nil
	}
	return s.newWorkdir(id)
}

// unpack extracts the uploaded package name into StateDir/workdirs/<id>-*/working_dir,
// in room reserved in the upload quota for what its files claim.
func (s *Server) unpack(id, name string) (workdir, error) {
	f, err := s.cfg.Packages.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return workdir{}, invalid("runtime_env.working_dir: package %s://%s was not uploaded; PUT it to /api/packages/%s/%s first",
			packageProtocol, name, packageProtocol, name)
	}
	if err != nil {
		return workdir{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return workdir{}, fmt.Errorf("read package %s: %w", name, err)
	}
	size, err := upload.UnpackedSize(f, info.Size(), s.cfg.PackageLimits)
	if err != nil {
		return workdir{}, fmt.Errorf("unpack package %s: %w", name, err)
	}
	room, err := s.quota.reserve(size, "unpacking package "+name)
	if err != nil {
		return workdir{}, err
	}
	wd, err := s.extract(id, f, info.Size())
	if err != nil {
		room.cancel()
		return workdir{}, err
	}
	room.keepFolder(wd.top)
	s.quota.touch(name)
	return wd, nil
}

// extract unpacks the archive f of the given size into a new working folder of the job's.
func (s *Server) extract(id string, f *os.File, size int64) (workdir, error) {
	wd, err := s.newWorkdir(id)
	if err != nil {
		return workdir{}, err
	}
	wd.dir = filepath.Join(wd.top, "working_dir")
	if err := upload.Extract(f, size, wd.dir, s.cfg.PackageLimits); err != nil {
		_ = os.RemoveAll(wd.top)
		return workdir{}, err
	}
	return wd, nil
}

// admit defaults and validates a job that starts in wd and submits it. A job that breaks
// a rule of jobspec is refused with every problem, each naming its field.
func (s *Server) admit(job *v1.TrainJob, wd workdir, sub jobs.Submission) (*store.Job, error) {
	if job.Spec.StoragePath == "" {
		job.Spec.StoragePath = s.cfg.StoragePath
	}
	job.Spec.WorkingDir = wd.dir
	job.Spec.RunName = jobs.FolderName(sub.ID)
	if err := jobspec.Default(job, jobspec.Env{WorkDir: wd.dir}); err != nil {
		return nil, fmt.Errorf("fill in the job's defaults: %w", err)
	}
	if err := jobspec.Validate(job); err != nil {
		return nil, invalidBecause(err)
	}
	if err := s.checkStorage(job.Spec.StoragePath, job.Spec.RunName); err != nil {
		return nil, err
	}
	// The script a Python command runs: in the working folder as it is now (an uploaded
	// package is unpacked already), or, for a git source, a path into its clone.
	if err := launcher.CheckScriptEarly(job); err != nil {
		return nil, invalidBecause(err)
	}
	if err := pinSource(job); err != nil {
		return nil, err
	}
	sub.Job = job
	j, err := s.cfg.Jobs.Submit(sub)
	if err != nil {
		// Not "job <ID>": a refused job was never created, and its ID may be one made for it.
		return nil, fmt.Errorf("submit the job: %w", err)
	}
	return j, nil
}

// pinSource resolves the branch of a job's git source to the commit its run will clone,
// with the credentials in the job's env (Arena's GIT_SYNC_USERNAME and GIT_SYNC_PASSWORD),
// so that an unknown branch, a wrong password or a bad URL is refused now, and every
// restart runs the same commit.
func pinSource(job *v1.TrainJob) error {
	src, ok := jobspec.GitSource(&job.Spec)
	if !ok || src.Revision != "" {
		return nil
	}
	var env []string
	for _, e := range job.Spec.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	commit, err := gitsource.Resolve(ctx, src.FromEnv(env))
	if err != nil {
		return invalid("spec.source.git: %v", err)
	}
	job.Spec.Source.Git.Revision = commit
	return nil
}

// gitTimeout bounds reading a git source's branches when a job is submitted.
const gitTimeout = 30 * time.Second

// removeWorkdir removes the working folder the server made for a deleted job, if it made
// one; a folder of the user's own choosing stays.
func (s *Server) removeWorkdir(j *store.Job) {
	spec, err := decodeSpec(j)
	if err != nil {
		return
	}
	rel, err := filepath.Rel(s.workdirs, spec.Spec.WorkingDir)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return
	}
	top := strings.Split(rel, string(filepath.Separator))[0]
	if !madeFor(top, jobs.FolderName(j.ID)) {
		return
	}
	if err := os.RemoveAll(filepath.Join(s.workdirs, top)); err != nil {
		s.log.Warn("remove a deleted job's working folder", "job", j.ID, "err", err)
		return
	}
	s.quota.forgetFolder(filepath.Join(s.workdirs, top))
}

// madeFor reports whether name is that of a folder newWorkdir made for the job whose
// folders are named folder: that name, '-' and the digits os.MkdirTemp adds.
func madeFor(name, folder string) bool {
	rest, ok := strings.CutPrefix(name, folder+"-")
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// checkStorage refuses a job whose runs would mix with the server's own files: a storage
// path (absolute, as jobspec.Default leaves it) that is the state folder or inside it, and
// a run folder (storage/<run name>) that would hold the state folder. Paths are compared with
// the symlinks of their existing parts resolved.
//
// It also refuses, as the job's supervisor would when it starts (rundir.CheckStorage), a
// storage path that someone other than root and the server's user could change, so that
// such a job is refused now rather than failing once it leaves the queue.
func (s *Server) checkStorage(storage, runName string) error {
	storage = jobspec.LocalStorage(storage) // a bucket's runs are staged in a folder
	if err := rundir.CheckStorage(storage); err != nil {
		return invalid("spec.storagePath: %v", err)
	}
	state := s.cfg.StateDir
	resolved := resolvePath(storage)
	if within(resolved, s.stateDir) {
		return invalid("spec.storagePath %s%s is the server's state folder %s or inside it, where the server keeps "+
			"its jobs database, specs and packages; choose a storage path outside %s", storage, alias(storage, resolved), state, state)
	}
	runDir := filepath.Join(storage, runName)
	if resolvedRun := resolvePath(runDir); within(s.stateDir, resolvedRun) {
		return invalid("the run folder %s%s (spec.storagePath and the job's ID) would hold the server's state folder %s; "+
			"choose another storage path or ID", runDir, alias(runDir, resolvedRun), state)
	}
	return nil
}

// alias says what a path resolves to when that is another path.
func alias(path, resolved string) string {
	if filepath.Clean(path) == resolved {
		return ""
	}
	return " (" + resolved + " once symlinks are resolved)"
}

// resolvePath returns p absolute and clean, with the symlinks of its longest existing
// part resolved; the rest, which does not exist yet, is joined as it is.
func resolvePath(p string) string {
	p, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if dir == filepath.Dir(dir) {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// within reports whether path is dir or inside it; both must be clean and absolute.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
