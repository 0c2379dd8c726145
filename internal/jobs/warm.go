package jobs

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// job the server places is handed to the standby, which becomes its supervisor, and the
// ranks that fit run on those Pythons without importing torch again. One standby at a
// time: a newer job replaces it. It runs as the server does, with no secret of any job.

// standby is a `trainyard run --standby` this server started.
type standby struct {
	cmd   *exec.Cmd
	stdin *os.File      // the write end of its stdin, where its job goes
	done  chan struct{} // closed once it exited and was reaped
	err   error         // what waiting for it gave, once done
	job   atomic.Value  // the ID of the job it was handed (a string), once handed
}

// standbyAfter is how long after a job starts the server starts the next standby: its
// Pythons' imports then leave the job's own start alone.
const standbyAfter = 5 * time.Second

// StandbyLog is the file in the state folder that receives the standbys' output.
const StandbyLog = "standby.log"

// keepWarmLater replaces the standby, standbyAfter from now, by one shaped like job j,
// which was just started.
func (s *Service) keepWarmLater(j *store.Job) {
	if !s.cfg.Prestart {
		return
	}
	spec, err := decodeSpec(j)
	if err != nil || !launcher.KeepsWarm(spec) || spec.Spec.Source != nil && spec.Spec.Source.Git != nil {
		return // the standby, if any, waits on for a job shaped like an earlier one
	}
	time.AfterFunc(standbyAfter, func() { s.keepWarm(j, spec) })
}

// keepWarm replaces the standby by one shaped like job j, unless the service stopped.
func (s *Service) keepWarm(j *store.Job, spec *v1.TrainJob) {
	s.dropStandby()
	sb, err := s.startStandby(j, spec)
	if err != nil {
		s.log.Warn("no standby for the next job", "job", j.ID, "err", err)
		return
	}
	s.mu.Lock()
	old, stopped := s.standby, s.stopped
	if !stopped {
		s.standby = sb
	}
	s.mu.Unlock()
	if old != nil { // another job's, started meanwhile
		old.stdin.Close()
	}
	if stopped {
		sb.stdin.Close()
	}
}

// startStandby starts a standby with the spec and GPUs of job j: the environment its
// supervisor had, less the job's secrets and stop files.
func (s *Service) startStandby(j *store.Job, spec *v1.TrainJob) (*standby, error) {
	out, err := os.OpenFile(filepath.Join(s.cfg.StateDir, StandbyLog), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the standby's log: %w", err)
	}
	defer out.Close()
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
	sb := &standby{cmd: cmd, stdin: w, done: make(chan struct{})}
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

// takeStandby removes the standby and returns it if it still waits.
func (s *Service) takeStandby() *standby {
	s.mu.Lock()
	sb := s.standby
	s.standby = nil
	s.mu.Unlock()
	if sb == nil {
		return nil
	}
	select {
	case <-sb.done:
		return nil
	default:
		return sb
	}
}

// stopWarm drops the standby and starts no more: the service stops.
func (s *Service) stopWarm() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.dropStandby()
}

// dropStandby stops the waiting standby, if any: at the end of its stdin it kills its
// spares and exits.
func (s *Service) dropStandby() {
	if sb := s.takeStandby(); sb != nil {
		sb.stdin.Close()
	}
}

// handTo makes the waiting standby, if there is one, run cmd (a supervisor's command,
// with its output going to the file log) and returns the standby's process and a wait
// for its end; ok is false when there is none or it could not take the job.
func (s *Service) handTo(id string, cmd *exec.Cmd, log string) (started *exec.Cmd, wait func() error, ok bool) {
	sb := s.takeStandby()
	if sb == nil {
		return nil, nil, false
	}
	sb.job.Store(id)
	req := launcher.StandbyRequest{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Dir: cmd.Dir, Log: log}
	err := json.NewEncoder(sb.stdin).Encode(req)
	sb.stdin.Close()
	if err != nil {
		s.log.Warn("the standby could not take the job; starting its supervisor afresh", "job", id, "err", err)
		return nil, nil, false
	}
	s.log.Info("job handed to the standby, which becomes its supervisor", "job", id, "pid", sb.cmd.Process.Pid)
	return sb.cmd, func() error { <-sb.done; return sb.err }, true
}
