package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/bucket"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/mirror"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
)

// checkBucketTimeout bounds the request that checks a job's bucket before it starts.
const checkBucketTimeout = time.Minute

// uploadTimeout bounds how long a run that ended waits for its checkpoints and files to be
// uploaded.
const uploadTimeout = 30 * time.Minute

// bucketStore opens the place of the job's run in its bucket, when its storage path is one
// (nil otherwise), and checks that the bucket answers with the credentials found, before
// anything starts.
func bucketStore(ctx context.Context, job *v1.TrainJob) (*bucket.Store, error) {
	u, err := bucket.Parse(job.Spec.StoragePath)
	if err != nil {
		return nil, nil // a folder: Validate refused any other URI
	}
	store, err := bucket.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, checkBucketTimeout)
	defer cancel()
	if err := store.Check(cctx); err != nil {
		return nil, fmt.Errorf("storage path (--storage-path): %w", err)
	}
	return store.Sub(job.Spec.RunName), nil
}

// useBucketEnv makes the job's own AWS settings (its env and secrets: AWS_ACCESS_KEY_ID,
// AWS_PROFILE, AWS_ENDPOINT_URL, ...) the ones its bucket is reached with, over the
// environment trainyard runs in (the job server's): this process runs this job only.
func useBucketEnv(env []v1.EnvVar) {
	for _, e := range env {
		if strings.HasPrefix(e.Name, "AWS_") || e.Name == bucket.PathStyleEnv {
			os.Setenv(e.Name, e.Value)
		}
	}
}

// checkStaging checks that no other user can change the staging folder of the bucket
// storage (u, for the message), before anything is downloaded into it.
func checkStaging(storage string, u bucket.URI) error {
	if err := rundir.CheckStorage(jobspec.LocalStorage(storage)); err != nil {
		return fmt.Errorf("the staging folder of %s (%s): %w", u, jobspec.StagingEnv, err)
	}
	return nil
}

// pullTimeout bounds the pull of a run's files from its bucket.
const pullTimeout = 5 * time.Minute

// pullRun brings the files of the run name of the bucket storage into its staging folder
// here, when this machine has not staged it (mirror.Pull).
func pullRun(storage, name string) error {
	u, err := bucket.Parse(storage)
	if err != nil {
		return err
	}
	if err := checkStaging(storage, u); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pullTimeout)
	defer cancel()
	store, err := bucket.Open(ctx, u)
	if err != nil {
		return err
	}
	if _, err := mirror.Pull(ctx, store.Sub(name), filepath.Join(jobspec.LocalStorage(storage), name)); err != nil {
		return fmt.Errorf("read run %s from %s: %w", name, u, err)
	}
	return nil
}

// runMirror is the mirror of a run kept in a bucket; its zero value (no bucket) does nothing.
type runMirror struct {
	m       *mirror.Mirror
	started bool // the run's session started: its end is worth saying
	closed  bool
	err     error
}

// startMirror starts the mirror of the job's run when its storage path is a bucket, after
// checking the bucket, and brings the run's record, results and latest checkpoint from
// the bucket when this machine lacks them (a run continued on another machine). Its
// errors are the user's to fix (exit 2) but for a failed download.
func startMirror(ctx context.Context, g *globals, job *v1.TrainJob, opts runOptions) (*runMirror, error) {
	store, err := bucketStore(ctx, job)
	if err != nil || store == nil {
		return &runMirror{}, usageErrorOrNil(err)
	}
	if opts.fresh {
		return &runMirror{}, usageError(fmt.Errorf("--fresh: run %s is kept in %s, where it cannot be moved aside: "+
			"give the new run another --name, or delete %s first", job.Spec.RunName, store.URI(), store.URI()))
	}
	// The staging folder is trusted as a folder storage path is, before anything is
	// downloaded into it: no other user can rename or replace what is in it.
	if err := checkStaging(job.Spec.StoragePath, store.URI()); err != nil {
		return &runMirror{}, usageError(err)
	}
	c := job.Spec.Checkpoints
	policy := checkpoint.Policy{Keep: int(c.Keep), Score: c.ScoreMetric, Order: c.ScoreOrder}
	m := mirror.New(store, jobspec.RunFolder(&job.Spec), mirror.Options{Logger: g.logger(), Policy: policy,
		Notify: func(text string) { fmt.Fprintln(g.io.Out, "trainyard: "+text) }})
	name, err := m.Restore(ctx)
	if err != nil {
		_ = m.Close(context.Background())
		return &runMirror{}, &exitError{code: ExitFailed, err: fmt.Errorf("run %s: %w", store.URI(), err)}
	}
	if name != "" {
		fmt.Fprintf(g.io.Out, "trainyard: downloaded %s of run %s from %s\n", name, job.Spec.RunName, store.URI())
	}
	return &runMirror{m: m}, nil
}

func usageErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return usageError(err)
}

// notifyTo shows the mirror's messages on the run's console from now on.
func (r *runMirror) notifyTo(console reporting.Notifier) {
	if r.m != nil {
		r.m.SetNotify(console.Notice)
		r.started = true
	}
}

// uploader is what the reporting session uploads through (nil: none).
func (r *runMirror) uploader() reporting.Uploader {
	if r.m == nil {
		return nil
	}
	return r.m
}

// close waits for the uploads and says where the run is kept; only the first call does.
func (r *runMirror) close(g *globals) error {
	if r.m == nil || r.closed {
		return nil
	}
	r.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), uploadTimeout)
	defer cancel()
	if r.err = r.m.Close(ctx); r.err == nil && r.started {
		fmt.Fprintf(g.io.Out, "trainyard: run uploaded to %s\n", r.m.URI())
	}
	return r.err
}
