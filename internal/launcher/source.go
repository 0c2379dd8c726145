package launcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gitsource"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/rundir"
)

// ResolveSource pins the commit of the job's git source before anything starts: the tip
// of its branch, read from the remote with the credentials in env (Arena's
// GIT_SYNC_USERNAME and GIT_SYNC_PASSWORD; the job's own env wins). An unknown branch, a
// wrong password or a bad URL fails here. A run whose code was cloned already (a restart
// or a --resume) keeps its commit and needs no network.
func ResolveSource(ctx context.Context, job *v1.TrainJob, env []string) error {
	return resolveSource(ctx, job, env, true)
}

// ResolveSourceAnew is ResolveSource for a run that starts over in a new folder (run
// --fresh): the tip of the branch, whatever clone the run's old folder holds.
func ResolveSourceAnew(ctx context.Context, job *v1.TrainJob, env []string) error {
	return resolveSource(ctx, job, env, false)
}

func resolveSource(ctx context.Context, job *v1.TrainJob, env []string, keepClone bool) error {
	src, ok := jobspec.GitSource(&job.Spec)
	if !ok || src.Revision != "" {
		return nil
	}
	if commit, err := gitsource.Head(codeDir(job)); err == nil && keepClone {
		job.Spec.Source.Git.Revision = commit
		return nil
	}
	commit, err := gitsource.Resolve(ctx, credentials(src, job, env))
	if err != nil {
		return fmt.Errorf("--sync-source: %w", err)
	}
	job.Spec.Source.Git.Revision = commit
	return nil
}

func credentials(src gitsource.Source, job *v1.TrainJob, env []string) gitsource.Source {
	src = src.FromEnv(env)
	var jobEnv []string
	for _, e := range job.Spec.Env {
		jobEnv = append(jobEnv, e.Name+"="+e.Value)
	}
	return src.FromEnv(jobEnv)
}

// codeDir is where a local run's git source is cloned: code/<repo> of its run folder.
func codeDir(job *v1.TrainJob) string {
	src, _ := jobspec.GitSource(&job.Spec)
	return filepath.Join(jobspec.RunFolder(&job.Spec), "code", gitsource.RepoName(src.URL))
}

// FetchSource clones the job's git source at its pinned commit (see ResolveSource) into
// the run folder's code/<repo>, once per run: a clone that is there already stays, so a
// restart runs the same code. The clone is made beside its final name and renamed into
// place, so a crash never leaves half a clone that looks whole; it is made in the run
// folder as folder opened it (through rundir.Run.Pinned), never in a folder put in its
// place. It records the commit in the run's record and returns it ("" for a job without
// a git source).
func FetchSource(ctx context.Context, job *v1.TrainJob, folder *rundir.Run, env []string) (string, error) {
	src, ok := jobspec.GitSource(&job.Spec)
	if !ok {
		return "", nil
	}
	pinned, done, err := folder.Pinned()
	if err != nil {
		return "", err
	}
	defer done()
	name := gitsource.RepoName(src.URL)
	commit, err := gitsource.Head(filepath.Join(pinned, "code", name))
	if err != nil {
		code := filepath.Join(pinned, "code")
		if commit, err = clone(ctx, credentials(src, job, env), code, name, folder.Perm().Dir); err != nil {
			return "", err
		}
	}
	if err := folder.Update(func(rec *rundir.Record) { rec.SourceCommit = commit }); err != nil {
		return "", err
	}
	return commit, CheckScript(job)
}

// clone clones src into the folder name of parent.
func clone(ctx context.Context, src gitsource.Source, parent, name string, mode fs.FileMode) (string, error) {
	if err := os.Mkdir(parent, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("make the run folder's code/: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+name+"-clone-*")
	if err != nil {
		return "", fmt.Errorf("clone into the run folder's code/: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	commit, err := gitsource.Clone(ctx, src, tmp, src.Revision)
	if err != nil {
		return "", fmt.Errorf("--sync-source: %w", err)
	}
	dst := filepath.Join(parent, name)
	_ = os.RemoveAll(dst) // a folder that is not a clone (gitsource.Head failed on it)
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("clone into the run folder's code/%s: %w", name, err)
	}
	return commit, nil
}
