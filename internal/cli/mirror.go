package cli

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/bucket"
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
	if !jobspec.InBucket(job.Spec.StoragePath) {
		return nil, nil
	}
	u, err := bucket.Parse(job.Spec.StoragePath)
	if err != nil {
		return nil, err
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

// runMirror is the mirror of a run kept in a bucket; its zero value (no bucket) does nothing.
type runMirror struct {
	m      *mirror.Mirror
	closed bool
	err    error
}

// startMirror starts the mirror of folder at store (nil: none) and brings the bucket's
// latest checkpoint and results into folder when this machine lacks them.
func startMirror(ctx context.Context, g *globals, store *bucket.Store, folder *rundir.Run, console reporting.Notifier) (*runMirror, error) {
	if store == nil {
		return &runMirror{}, nil
	}
	m := mirror.New(store, folder.Dir, mirror.Options{Logger: g.logger(), Notify: console.Notice})
	name, err := m.Restore(ctx)
	if err != nil {
		_ = m.Close(context.Background())
		return nil, fmt.Errorf("run %s: %w", store.URI(), err)
	}
	if name != "" {
		console.Notice(fmt.Sprintf("downloaded %s from %s", name, store.URI()))
	}
	return &runMirror{m: m}, nil
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
	if r.err = r.m.Close(ctx); r.err == nil {
		fmt.Fprintf(g.io.Out, "trainyard: run uploaded to %s\n", r.m.URI())
	}
	return r.err
}
