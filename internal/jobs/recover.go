package jobs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/store"
)

// reattach runs at start: it reconciles the running jobs that the store records with
// the supervisors that run. Jobs whose supervisor is alive are followed again; the
// others are recovered (see recoverJob).
func (s *Service) reattach() error {
	running, err := s.cfg.Store.List(store.Filter{Statuses: []store.Status{store.Running}})
	if err != nil {
		return fmt.Errorf("re-attach to running jobs: %w", err)
	}
	for _, j := range running {
		if !s.supervising(j) {
			s.recoverJob(j)
			continue
		}
		s.log.Info("re-attached to running job", "job", j.ID, "supervisor", j.SupervisorPID)
		s.passOnStop(j)
	}
	return nil
}

// checkRunning recovers running jobs whose supervisor is gone without this process
// seeing it end (supervisors started before a server restart).
func (s *Service) checkRunning() {
	running, err := s.cfg.Store.List(store.Filter{Statuses: []store.Status{store.Running}})
	if err != nil {
		s.log.Error("list running jobs", "err", err)
		return
	}
	for _, j := range running {
		if !s.isChild(j.ID) && !s.supervising(j) {
			s.recoverJob(j)
			continue
		}
		s.checkResized(j)
	}
}

// recoverJob reconciles a running job whose recorded supervisor does not run. A
// supervisor of the job that runs although the store does not record it (a server died
// between starting it and recording it) is adopted. A job placed but whose supervisor
// never started (a server died between recording the placement and starting it) is
// started now, on the GPUs its record holds, unless a user stopped it, the server
// preempted it (it is queued again instead), or its run already finished. Otherwise its
// supervisor ended, and the job is settled.
func (s *Service) recoverJob(j *store.Job) {
	if pid := s.findSupervisor(j.ID); pid > 0 {
		s.adopt(j.ID, pid)
		return
	}
	if j.SupervisorPID == 0 && !j.StopRequested && !j.Preempting() && !runFinished(j.RunDir) {
		s.log.Warn("starting the supervisor of a job placed but never started", "job", j.ID, "gpus", j.GPUs)
		s.supervise(j)
		return
	}
	s.settle(j.ID, nil)
}

// runFinished reports whether the run in runDir has a final phase (a supervisor started
// but not recorded ran it to its end while no server watched).
func runFinished(runDir string) bool {
	rec, err := rundir.ReadRecord(runDir)
	return err == nil && rec.Phase.Finished()
}

// adopt records pid as the job's supervisor, and passes on a stop or a preemption asked
// meanwhile.
func (s *Service) adopt(id string, pid int) {
	j, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Status != store.Running {
			return fmt.Errorf("the job is %s", j.Status)
		}
		j.SupervisorPID = pid
		return nil
	})
	if err != nil {
		s.log.Error("adopt a job's supervisor", "job", id, "supervisor", pid, "err", err)
		return
	}
	s.log.Warn("adopted a supervisor that was started but not recorded", "job", id, "supervisor", pid)
	s.passOnStop(j)
}

// passOnStop signals the supervisor of a job found running at start (or adopted) that a
// user asked to stop, or that the server preempted but whose supervisor was not told yet
// (the server died between recording the preemption and signalling).
func (s *Service) passOnStop(j *store.Job) {
	switch {
	case j.StopRequested:
		s.signal(j)
	case j.Preempting() && !j.Preemption.Signalled:
		s.log.Warn("telling a preempted job's supervisor to stop, which the last server did not", "job", j.ID,
			"supervisor", j.SupervisorPID)
		s.tellPreempted(j)
	case j.Resize != nil && !j.Resize.Told:
		s.log.Warn("asking an elastic job's supervisor to resize, which the last server did not", "job", j.ID,
			"supervisor", j.SupervisorPID)
		s.tellResize(j)
	}
}

// supervising reports whether the job's recorded supervisor is alive (see supervises).
func (s *Service) supervising(j *store.Job) bool {
	return j.SupervisorPID > 0 && supervises(j.SupervisorPID, s.specPath(j.ID))
}

// findSupervisor returns the pid of a live supervisor of the job found among this
// machine's processes, or 0.
func (s *Service) findSupervisor(id string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		s.log.Error("look for a job's supervisor", "job", id, "err", err)
		return 0
	}
	spec := s.specPath(id)
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && supervises(pid, spec) {
			return pid
		}
	}
	return 0
}

// supervises reports whether pid is a live process (not a zombie) of this user whose
// command line ends with `run -f <spec>`, or `run --start-workers N -f <spec>` (an
// elastic gang started smaller): a supervisor of that spec. A recycled pid is not, so a
// pid is signalled only after this check.
func supervises(pid int, spec string) bool {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	var st syscall.Stat_t
	if err := syscall.Stat(proc, &st); err != nil || int(st.Uid) != os.Getuid() {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	if len(args) < 4 || !slices.Equal(args[len(args)-2:], []string{"-f", spec}) {
		return false
	}
	if args = args[:len(args)-2]; len(args) >= 4 && args[len(args)-2] == "--start-workers" {
		args = args[:len(args)-2]
	}
	if args[len(args)-1] != "run" {
		return false
	}
	stat, err := os.ReadFile(filepath.Join(proc, "stat"))
	return err == nil && !bytes.Contains(stat, []byte(") Z "))
}
