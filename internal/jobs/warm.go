package jobs

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/ganglease"
	"github.com/trainyard/trainyard/internal/launcher"
	"github.com/trainyard/trainyard/internal/store"
)

// With Config.Prestart, the server keeps the next job's Pythons warm: after it starts a
// job, it starts a standby shaped like it (`trainyard run --standby`, see
// launcher/pool.go), which starts a Python per rank, imports torch and waits. The next
// job of that shape (launcher.WarmShape) the server places is handed to the standby,
// which becomes its supervisor, and the ranks that fit run on those Pythons without
// importing torch again; a job of another shape starts afresh and leaves the standbys
// alone. Up to Config.PrestartShapes standbys wait at once, one per shape, for the most
// recent shapes: a job of a new shape replaces the oldest. They run as the server does,
// with no secret of any job.

// standby is a `trainyard run --standby` this server started.
type standby struct {
	shape string // the launcher.WarmShape of the jobs it waits for
	cmd   *exec.Cmd
	stdin *os.File      // the write end of its stdin, where its job goes
	done  chan struct{} // closed once it exited and was reaped
	err   error         // what waiting for it gave, once done
	job   atomic.Value  // the ID of the job it was handed (a string), once handed
}

// waiting reports whether the standby still waits for a job (it has not exited).
func (sb *standby) waiting() bool {
	select {
	case <-sb.done:
		return false
	default:
		return true
	}
}

// standbyAfter is how long after a job starts the server starts the next standby: its
// Pythons' imports then leave the job's own start alone.
const standbyAfter = 5 * time.Second

// StandbyLog is the file in the state folder that receives the standbys' output.
const StandbyLog = "standby.log"

// warmShape is the shape of job j, whose spec is spec: what its first attempt starts.
func warmShape(j *store.Job, spec *v1.TrainJob) string {
	workers := spec.Spec.WorkerCount()
	if n := len(j.GPUs); n > 0 && n < workers {
		workers = n // an elastic gang started small (startWorkers)
	}
	return launcher.WarmShape(spec, workers)
}

// keepWarmLater makes sure, standbyAfter from now, that a standby shaped like job j,
// which was just started, waits.
func (s *Service) keepWarmLater(j *store.Job) {
	if !s.cfg.Prestart {
		return
	}
	spec, err := decodeSpec(j)
	if err != nil || !launcher.KeepsWarm(spec) || spec.Spec.Source != nil && spec.Spec.Source.Git != nil {
		return // the standbys, if any, wait on for jobs shaped like earlier ones
	}
	time.AfterFunc(standbyAfter, func() { s.keepWarm(j, spec) })
}

// keepWarm starts a standby shaped like job j unless one waits already (which becomes
// the most recent) or the service stopped; the oldest standbys go beyond the most
// shapes the server keeps.
func (s *Service) keepWarm(j *store.Job, spec *v1.TrainJob) {
	shape := warmShape(j, spec)
	s.mu.Lock()
	if i := s.waitingFor(shape); i >= 0 || s.stopped {
		if i >= 0 {
			sb := s.standbys[i]
			s.standbys = append(slices.Delete(s.standbys, i, i+1), sb)
		}
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	sb, err := s.startStandby(j, spec, shape)
	if err != nil {
		s.log.Warn("no standby for the next job", "job", j.ID, "err", err)
		return
	}
	s.mu.Lock()
	var drop []*standby
	if s.stopped {
		drop = []*standby{sb}
	} else {
		if i := s.waitingFor(shape); i >= 0 { // another job's, started meanwhile
			drop = append(drop, s.standbys[i])
			s.standbys = slices.Delete(s.standbys, i, i+1)
		}
		s.standbys = append(s.standbys, sb)
		if n := len(s.standbys) - max(s.cfg.PrestartShapes, 1); n > 0 {
			drop = append(drop, s.standbys[:n]...)
			s.standbys = slices.Clone(s.standbys[n:])
		}
	}
	s.mu.Unlock()
	for _, old := range drop {
		old.stdin.Close() // at the end of its stdin it kills its spares and exits
	}
}

// waitingFor is the index in s.standbys of the one of that shape, or -1, after it
// forgot those that exited (a standby whose Python failed); s.mu is held.
func (s *Service) waitingFor(shape string) int {
	s.standbys = slices.DeleteFunc(s.standbys, func(sb *standby) bool { return !sb.waiting() })
	return slices.IndexFunc(s.standbys, func(sb *standby) bool { return sb.shape == shape })
}

// startStandby starts a standby with the spec and GPUs of job j: the environment its
// supervisor had, less the job's secrets and stop files.
func (s *Service) startStandby(j *store.Job, spec *v1.TrainJob, shape string) (*standby, error) {
	out, err := os.OpenFile(filepath.Join(s.cfg.StateDir, StandbyLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the standbys' log: %w", err)
	}
	defer out.Close()
	if fi, err := out.Stat(); err == nil && fi.Size() > maxStandbyLog {
		_ = out.Truncate(0) // it says how standbys started and why one could not; old news
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	args := append(append([]string{"run", "--standby"}, startWorkers(j, spec.Spec.WorkerCount())...), "-f", s.specPath(j.ID))
	cmd := exec.Command(s.cfg.Binary, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Dir = r, out, out, s.cfg.StateDir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if ids := ganglease.Visible(j.GPUs); ids != "" {
		cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+ids)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // as the supervisor it becomes
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start a standby: %w", err)
	}
	sb := &standby{shape: shape, cmd: cmd, stdin: w, done: make(chan struct{})}
	go func() {
		sb.err = cmd.Wait()
		close(sb.done)
		if sb.job.Load() == nil {
			s.log.Info("standby exited", "pid", cmd.Process.Pid, "err", sb.err)
		}
	}()
	s.log.Info("standby started: Pythons for a job shaped like this one", "job", j.ID, "pid", cmd.Process.Pid)
	return sb, nil
}

// maxStandbyLog is the size beyond which the standbys' log starts afresh.
const maxStandbyLog = 1 << 20

// takeStandby removes the waiting standby of that shape and returns it, if there is one.
func (s *Service) takeStandby(shape string) *standby {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.waitingFor(shape)
	if i < 0 {
		return nil
	}
	sb := s.standbys[i]
	s.standbys = slices.Delete(s.standbys, i, i+1)
	return sb
}

// stopWarm drops the standbys and starts no more: the service stops.
func (s *Service) stopWarm() {
	s.mu.Lock()
	s.stopped = true
	drop := s.standbys
	s.standbys = nil
	s.mu.Unlock()
	for _, sb := range drop {
		sb.stdin.Close()
	}
}

// handTo makes the waiting standby of the job's shape, if there is one, run cmd (a
// supervisor's command, with its output going to the file log) and returns the
// standby's process and a wait for its end; ok is false when there is none or it could
// not take the job.
func (s *Service) handTo(j *store.Job, spec *v1.TrainJob, cmd *exec.Cmd, log string) (started *exec.Cmd, wait func() error, ok bool) {
	if !s.cfg.Prestart {
		return nil, nil, false
	}
	sb := s.takeStandby(warmShape(j, spec))
	if sb == nil {
		return nil, nil, false
	}
	sb.job.Store(j.ID)
	req := launcher.StandbyRequest{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir, Log: log}
	err := json.NewEncoder(sb.stdin).Encode(req)
	sb.stdin.Close()
	if err != nil {
		s.log.Warn("the standby could not take the job; starting its supervisor afresh", "job", j.ID, "err", err)
		return nil, nil, false
	}
	s.log.Info("job handed to the standby, which becomes its supervisor", "job", j.ID, "pid", sb.cmd.Process.Pid)
	return sb.cmd, func() error { <-sb.done; return sb.err }, true
}
