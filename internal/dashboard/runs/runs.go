// Package runs is the dashboard's view of local runs: a dashboard.Backend over the run
// folders of a storage path (what `trainyard run` writes), read-only. A run folder is a
// job whose ID and name are the run's name; its status comes from its run.json, its log
// is its console log (every rank's lines with their [rank N] prefixes, as trainyard run
// printed them; rank 0's log of its last attempt for a run older than the console log),
// unless a rank is asked for.
package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/dashboard"
	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/logstream"
	"github.com/trainyard/trainyard/internal/reporting"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/server"
)

// ErrReadOnly is the answer to Stop and Delete: local runs are watched, not controlled.
var ErrReadOnly = errors.New("this dashboard shows local runs read-only: stop a run with Ctrl-C where it runs (or kill its trainyard run process), delete one by removing its folder")

// maxLogBytes is how much of a log's end Logs reads.
const maxLogBytes = 16 << 20

// Source reads the runs of a storage path.
type Source struct {
	// Storage is the folder that holds the runs.
	Storage string
	// Poll is how often Follow reads a log again; 0 is a second.
	Poll time.Duration
}

// notFound is an error that client.IsNotFound recognises.
func notFound(format string, args ...any) error {
	return &client.APIError{Status: 404, Message: fmt.Sprintf(format, args...)}
}

// run reads one run folder as a job.
func (s *Source) run(name string) (client.JobDetail, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return client.JobDetail{}, notFound("no run %q in %s", name, s.Storage)
	}
	dir := filepath.Join(s.Storage, name)
	rec, err := rundir.Observe(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return client.JobDetail{}, notFound("no run %q in %s", name, s.Storage)
	}
	if err != nil {
		return client.JobDetail{}, err
	}
	d := client.JobDetail{Run: server.RunOf(rec)}
	j := client.Job{ID: name, Name: name, Status: status(rec.Phase), Message: rec.Reason, RunDir: dir,
		SubmittedAt: rec.Created, EndedAt: ended(dir, rec)}
	created := rec.Created
	j.StartedAt = &created
	if data, err := os.ReadFile(filepath.Join(dir, rundir.SpecFile)); err == nil {
		var spec v1.TrainJob
		if yaml.Unmarshal(data, &spec) == nil {
			d.Spec = &spec
			j.Workers = spec.Spec.WorkerCount()
			res := spec.Spec.Resources
			j.Resources = &res
			j.Entrypoint = strings.Join(append(slices.Clone(spec.Spec.Command), spec.Spec.Args...), " ")
		}
	}
	j.Restarts, j.Preemptions = rec.Restarts(), rec.Preemptions
	d.Job = j
	results := dir
	if gang, ok := rundir.GangRun(dir); ok {
		results, d.GangRunDir = gang, gang
	}
	if last, ok, err := reporting.LastResult(results); err == nil && ok {
		d.Results = server.ResultOf(last)
	}
	d.Checkpoints, _ = server.CheckpointNames(results)
	return d, nil
}

// ended is when a run ended: its finish, or for one interrupted (which may be continued,
// so run.json records no finish) its last sign of life, so that its duration stops
// growing: the newest of its last record, its console log's and rank 0's log's last write
// and its last report. For a run whose launcher was killed (SIGKILL: it recorded nothing
// more), that is when it last printed or reported.
func ended(dir string, rec rundir.Record) *time.Time {
	if rec.Finished != nil || rec.Phase.Active() {
		return rec.Finished
	}
	at := rec.Updated
	files := []string{rundir.ConsoleLog, reporting.ResultFile}
	if n := len(rec.Attempts); n > 0 {
		files = append(files, rundir.LogPath(rec.Attempts[n-1].Number, 0))
	}
	for _, name := range files {
		if st, err := os.Lstat(filepath.Join(dir, name)); err == nil && st.ModTime().After(at) {
			at = st.ModTime()
		}
	}
	return &at
}

// status maps a run's phase to a job's status.
func status(p v1.JobPhase) client.JobStatus {
	switch p {
	case v1.PhaseSucceeded:
		return "SUCCEEDED"
	case v1.PhaseFailed:
		return "FAILED"
	case v1.PhaseInterrupted:
		return "STOPPED"
	case v1.PhasePending, v1.PhaseSuspended:
		return "PENDING"
	}
	return "RUNNING"
}

// names lists the run folders: folders with a run.json, links not followed.
func (s *Source) names() ([]string, error) {
	entries, err := os.ReadDir(s.Storage)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the runs in %s: %w", s.Storage, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			if _, err := os.Lstat(filepath.Join(s.Storage, e.Name(), rundir.RecordFile)); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	return out, nil
}

// List returns the runs in the given statuses, oldest first.
func (s *Source) List(ctx context.Context, statuses ...client.JobStatus) ([]client.Job, error) {
	page, err := s.ListPage(ctx, client.ListOptions{Statuses: statuses})
	return page.Jobs, err
}

// ListPage returns a page of the runs, as the server pages its jobs.
func (s *Source) ListPage(_ context.Context, opts client.ListOptions) (client.JobList, error) {
	names, err := s.names()
	if err != nil {
		return client.JobList{}, err
	}
	var jobs []client.Job
	for _, name := range names {
		if d, err := s.run(name); err == nil { // else a run folder being written, or broken: not listed
			jobs = append(jobs, d.Job)
		}
	}
	return dashboard.PageOf(jobs, opts), nil
}

// Get returns a run.
func (s *Source) Get(_ context.Context, ref string) (client.JobDetail, error) { return s.run(ref) }

// Stop refuses: see ErrReadOnly.
func (s *Source) Stop(context.Context, string) (client.Job, error) { return client.Job{}, ErrReadOnly }

// Delete is refused: the dashboard of local runs is read-only (delete a run's folder).
func (s *Source) Delete(context.Context, string) error { return ErrReadOnly }

// logPath returns the file of a run's log: the rank's of its last attempt, or without a
// rank its console log (rank 0's log when the run has none: it ran before trainyard kept
// one).
func (s *Source) logPath(id string, rank *int) (string, client.JobDetail, error) {
	d, err := s.run(id)
	if err != nil {
		return "", d, err
	}
	want := 0
	if rank != nil {
		want = *rank
	} else if console := filepath.Join(d.Job.RunDir, rundir.ConsoleLog); isFile(console) {
		return console, d, nil
	}
	if d.Run == nil || len(d.Run.Attempts) == 0 {
		return "", d, notFound("run %s has not started an attempt yet", id)
	}
	last := d.Run.Attempts[len(d.Run.Attempts)-1]
	for _, rk := range last.Ranks {
		if rk.Rank == want {
			if filepath.IsAbs(rk.Log) {
				return rk.Log, d, nil
			}
			return filepath.Join(d.Job.RunDir, rk.Log), d, nil
		}
	}
	return "", d, notFound("attempt %d of run %s has no rank %d", last.Number, id, want)
}

// Logs returns the end of a run's log.
func (s *Source) Logs(_ context.Context, id string, opts client.LogOptions) (string, error) {
	path, _, err := s.logPath(id, opts.Rank)
	if err != nil {
		return "", err
	}
	text, _, err := readEnd(path, 0)
	if err != nil {
		return "", err
	}
	return logstream.LastLines(text, opts.Tail), nil
}

// isFile reports whether path is a regular file (not a link).
func isFile(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode().IsRegular()
}

// readEnd reads a file from offset (its last maxLogBytes at most) and returns the text
// and the offset after it.
func readEnd(path string, offset int64) (string, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", offset, nil
	}
	if err != nil {
		return "", offset, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", offset, err
	}
	if st.Size() < offset {
		offset = 0 // the file was replaced
	}
	offset = max(offset, st.Size()-maxLogBytes)
	data, err := io.ReadAll(io.NewSectionReader(f, offset, st.Size()-offset))
	return string(data), offset + int64(len(data)), err
}

// WriteLog copies the whole of a run's log, as it is now, to w.
func (s *Source) WriteLog(_ context.Context, id string, opts client.LogOptions, w io.Writer) error {
	path, _, err := s.logPath(id, opts.Rank)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = io.Copy(w, io.LimitReader(f, st.Size()))
	return err
}

// Follow writes a run's log as it grows until the run has finished.
func (s *Source) Follow(ctx context.Context, ref string, w io.Writer, opts client.LogOptions) error {
	path, _, err := s.logPath(ref, opts.Rank)
	if err != nil {
		return err
	}
	text, offset, err := readEnd(path, 0)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, logstream.LastLines(text, opts.Tail)); err != nil {
		return err
	}
	poll := cmp.Or(s.Poll, time.Second)
	for {
		d, err := s.run(ref)
		done := err == nil && d.Job.EndedAt != nil
		text, offset, err = readEnd(path, offset)
		if err != nil {
			return err
		}
		if text != "" {
			if _, err := io.WriteString(w, text); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// Results returns a run's results, thinned as the server thins them.
func (s *Source) Results(_ context.Context, ref string, opts client.ResultOptions) (client.ResultList, error) {
	d, err := s.run(ref)
	if err != nil {
		return client.ResultList{}, err
	}
	return server.ReadResultList(rundir.ResultsDir(d.Job.RunDir), opts.After, cmp.Or(opts.Max, server.DefaultResultPoints))
}

// Checkpoints lists every checkpoint a run committed, kept or deleted.
func (s *Source) Checkpoints(_ context.Context, ref string) (client.Checkpoints, error) {
	d, err := s.run(ref)
	if err != nil {
		return client.Checkpoints{}, err
	}
	metric := ""
	if d.Spec != nil {
		metric = d.Spec.Spec.Checkpoints.ScoreMetric
	}
	return server.CheckpointList(rundir.ResultsDir(d.Job.RunDir), metric)
}

// Node returns this machine's GPUs (NVML through nvidia-smi), none allocated: local runs
// are not scheduled.
func (s *Source) Node(ctx context.Context) (client.Node, error) {
	inv, err := device.DiscoverWith(ctx, device.Options{Timeout: 5 * time.Second})
	if err != nil {
		return client.Node{}, err
	}
	var n client.Node
	for _, g := range inv.GPUs {
		n.GPUs.Indices = append(n.GPUs.Indices, g.Index)
		if g.UtilizationPercent >= 0 {
			n.GPUs.Utilization = append(n.GPUs.Utilization, client.GPUUtilization{Index: g.Index,
				Percent: float64(g.UtilizationPercent), MemoryUsedBytes: g.MemoryUsedMiB << 20, MemoryTotalBytes: g.MemoryMiB << 20})
		}
	}
	n.GPUs.Total = int64(len(inv.GPUs))
	n.GPUs.Free = n.GPUs.Total
	return n, nil
}
