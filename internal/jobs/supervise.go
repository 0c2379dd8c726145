package jobs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
)

// errNotPending aborts recording a start: the job is no longer pending.
var errNotPending = errors.New("the job is no longer pending")

// exited is a supervisor of this process that ended.
type exited struct {
	id  string
	err error
}

// start writes the job's spec and starts its supervisor, detached in a session of its own
// so that it outlives the server, with the GPUs the scheduler gave it.
func (s *Service) start(j *store.Job, gpus [][]int) {
	spec, err := decodeSpec(j)
	if err == nil {
		err = s.writeSpec(j.ID, spec)
	}
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = s.launch(j, gpus)
	}
	if err != nil {
		s.fail(j.ID, "could not start: "+err.Error())
		return
	}
	now := time.Now()
	_, err = s.cfg.Store.Update(j.ID, func(j *store.Job) error {
		if j.Status != store.Pending { // stopped (or deleted) while its supervisor started
			return errNotPending
		}
		j.Status, j.Message, j.StartedAt, j.SupervisorPID, j.GPUs = store.Running, "", &now, cmd.Process.Pid, gpus
		return nil
	})
	if err != nil {
		s.log.Warn("job left pending while its supervisor started; stopping the supervisor", "job", j.ID, "err", err)
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	s.mu.Lock()
	s.children[j.ID] = true
	s.mu.Unlock()
	go func() { s.exits <- exited{id: j.ID, err: cmd.Wait()} }()
}

func (s *Service) writeSpec(id string, job *v1.TrainJob) error {
	data, err := yaml.Marshal(job)
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	return os.WriteFile(s.specPath(id), data, 0o600)
}

// launch starts `trainyard run -f <spec>` with its output in the run folder's console log.
func (s *Service) launch(j *store.Job, gpus [][]int) (*exec.Cmd, error) {
	if err := rundir.MakeFolder(j.RunDir); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(LogPath(j), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, rundir.PermFor(j.RunDir).File)
	if err != nil {
		return nil, fmt.Errorf("create console log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(s.cfg.Binary, "run", "-f", s.specPath(j.ID))
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, j.RunDir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	if ids := flatten(gpus); ids != "" {
		cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+ids)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	return cmd, nil
}

func flatten(gpus [][]int) string {
	var ids []string
	for _, w := range gpus {
		for _, g := range w {
			ids = append(ids, strconv.Itoa(g))
		}
	}
	return strings.Join(ids, ",")
}

// signal asks a job's supervisor to stop its gang.
func (s *Service) signal(j *store.Job) {
	if j.SupervisorPID > 0 && s.supervising(j) {
		_ = syscall.Kill(j.SupervisorPID, syscall.SIGTERM)
	}
}

// checkRunning settles running jobs whose supervisor is gone without this process seeing
// it end (supervisors started before a server restart).
func (s *Service) checkRunning() {
	running, err := s.cfg.Store.List(store.Filter{Statuses: []store.Status{store.Running}})
	if err != nil {
		s.log.Error("list running jobs", "err", err)
		return
	}
	for _, j := range running {
		s.mu.Lock()
		child := s.children[j.ID]
		s.mu.Unlock()
		if !child && !s.supervising(j) {
			s.settle(j.ID, nil)
		}
	}
}

// reattach runs at start: running jobs whose supervisor is alive are followed again, the
// others are settled from their run folders.
func (s *Service) reattach() error {
	running, err := s.cfg.Store.List(store.Filter{Statuses: []store.Status{store.Running}})
	if err != nil {
		return fmt.Errorf("re-attach to running jobs: %w", err)
	}
	for _, j := range running {
		if s.supervising(j) {
			s.log.Info("re-attached to running job", "job", j.ID, "supervisor", j.SupervisorPID)
			if j.StopRequested {
				s.signal(j)
			}
			continue
		}
		s.settle(j.ID, nil)
	}
	return nil
}

// supervising reports whether the job's supervisor process is alive: its pid exists and
// runs this job's spec (a recycled pid does not).
func (s *Service) supervising(j *store.Job) bool {
	if j.SupervisorPID <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(j.SupervisorPID), "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte(s.specPath(j.ID))) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(j.SupervisorPID), "stat"))
	return err == nil && !bytes.Contains(stat, []byte(") Z "))
}

// settle records how a job whose supervisor ended went, from its run folder.
func (s *Service) settle(id string, waitErr error) {
	s.mu.Lock()
	delete(s.children, id)
	s.mu.Unlock()
	now := time.Now()
	_, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Status.Terminal() {
			return nil
		}
		j.Status, j.Message = outcome(j, waitErr)
		j.EndedAt, j.SupervisorPID, j.ExitCode = &now, 0, entrypointExit(j.RunDir)
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("record finished job", "job", id, "err", err)
	}
	s.poke()
}

// outcome reads the run's record: the phase and reason its supervisor wrote last.
func outcome(j *store.Job, waitErr error) (store.Status, string) {
	rec, err := rundir.ReadRecord(j.RunDir)
	switch {
	case err == nil && rec.Phase == v1.PhaseSucceeded:
		return store.Succeeded, rec.Reason
	case err == nil && rec.Phase == v1.PhaseFailed:
		return store.Failed, rec.Reason
	case j.StopRequested:
		return store.Stopped, "stopped by a user"
	}
	why := fmt.Sprintf("its supervisor (pid %d) ended before the job did", j.SupervisorPID)
	if waitErr != nil {
		why += " (" + waitErr.Error() + ")"
	}
	if last := lastLine(LogPath(j)); last != "" {
		why += ": " + last
	}
	return store.Failed, why
}

// entrypointExit returns the exit code of rank 0 in the last attempt of the run in
// runDir, the process that runs the entrypoint, if it exited.
func entrypointExit(runDir string) *int {
	rec, err := rundir.ReadRecord(runDir)
	if err != nil || len(rec.Attempts) == 0 {
		return nil
	}
	for _, rk := range rec.Attempts[len(rec.Attempts)-1].Ranks {
		if rk.Rank == 0 {
			return rk.ExitCode
		}
	}
	return nil
}

// lastLine returns the last non-empty line of a file (read from its last 4 KiB), if any.
func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 4096)
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	n, _ := f.ReadAt(buf, max(0, st.Size()-int64(len(buf))))
	lines := strings.Split(strings.TrimSpace(string(buf[:n])), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
