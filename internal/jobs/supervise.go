package jobs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/ganglease"
	"github.com/trainyard/trainyard/internal/preempt"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/secrets"
	"github.com/trainyard/trainyard/internal/store"
)

// errNotPending aborts recording a start: the job is no longer pending.
var errNotPending = errors.New("the job is no longer pending")

// exited is a supervisor of this process that ended.
type exited struct {
	id  string
	err error
}

// start records the job's placement (RUNNING, with its GPUs and no supervisor yet), then
// starts its supervisor and records the supervisor's pid. The intent comes first, as
// Nomad writes a plan before a client starts a task: a server that dies in between leaves
// a record that the next one reconciles (see recoverJob), never a gang on GPUs that the
// scheduler counts as free.
func (s *Service) start(j *store.Job, gpus [][]int) {
	now := time.Now()
	placed, err := s.cfg.Store.Update(j.ID, func(j *store.Job) error {
		if j.Status != store.Pending { // stopped since the scheduler read it
			return errNotPending
		}
		j.Status, j.Message, j.StartedAt, j.SupervisorPID, j.GPUs = store.Running, "", &now, 0, gpus
		if p := j.Preemption; p != nil && p.Requeued != nil && p.Resumed == nil {
			p.Resumed = &now
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, errNotPending) {
			s.log.Error("record a job's placement", "job", j.ID, "err", err)
		}
		return
	}
	s.fault(FaultAfterRecord)
	s.supervise(placed)
}

// supervise starts the supervisor of a placed job on the GPUs its record holds, records
// the supervisor's pid, and has Run settle the job when the supervisor ends.
func (s *Service) supervise(j *store.Job) {
	s.setChild(j.ID, true)
	cmd, wait, err := s.startSupervisor(j)
	if err != nil {
		s.setChild(j.ID, false)
		s.fail(j.ID, "could not start: "+err.Error())
		return
	}
	s.fault(FaultAfterLaunch)
	rec, err := s.cfg.Store.Update(j.ID, func(j *store.Job) error {
		if j.Status != store.Running {
			return fmt.Errorf("the job is %s", j.Status)
		}
		j.SupervisorPID = cmd.Process.Pid
		return nil
	})
	switch {
	case err != nil:
		s.log.Warn("could not record a job's supervisor; stopping it", "job", j.ID, "err", err)
		_ = cmd.Process.Signal(syscall.SIGTERM)
	case rec.StopRequested: // stopped while its supervisor started
		_ = cmd.Process.Signal(syscall.SIGTERM)
	case rec.Preempting(): // preempted while its supervisor started
		if cmd.Process.Signal(syscall.SIGTERM) == nil {
			s.signalled(j.ID)
		}
	}
	go func() { s.exits <- exited{id: j.ID, err: wait()} }()
	if err == nil {
		s.keepWarmLater(rec)
	}
}

// startSupervisor writes the job's spec and starts its supervisor, and returns it and a
// wait for its end. The spec allows the restarts the job has left: those of earlier
// supervisors are used up (see Job.Restarts).
func (s *Service) startSupervisor(j *store.Job) (*exec.Cmd, func() error, error) {
	spec, err := decodeSpec(j)
	if err != nil {
		return nil, nil, err
	}
	spec.Spec.MaxRestarts = max(0, spec.Spec.MaxRestarts-int32(j.Restarts))
	if s.cfg.LeaseSocket != "" {
		// The job's processes (not its supervisor, whose GPUs are placed) may lease GPUs
		// for a gang of their own: a Ray Train driver's fit(). The secret goes with the
		// job's other secrets, not into its spec.
		spec.Spec.Env = append(spec.Spec.Env, v1.EnvVar{Name: ganglease.EnvSocket, Value: s.cfg.LeaseSocket},
			v1.EnvVar{Name: ganglease.EnvJob, Value: j.ID})
	}
	if err := s.writeSecrets(j); err != nil {
		return nil, nil, err
	}
	if err := s.writeSpec(j.ID, spec); err != nil {
		return nil, nil, err
	}
	return s.launch(j, j.GPUs)
}

// writeSecrets writes the file of secrets the job's supervisor gives its processes: those
// taken from the job at submission, and its GPU lease secret.
func (s *Service) writeSecrets(j *store.Job) error {
	var env []v1.EnvVar
	if len(j.SecretEnv) > 0 {
		stored, err := secrets.ReadFile(s.secretsPath(j.ID))
		if err != nil {
			return err
		}
		env = slices.DeleteFunc(stored, func(e v1.EnvVar) bool { return e.Name == ganglease.EnvSecret })
	}
	if s.cfg.LeaseSocket != "" {
		env = append(env, v1.EnvVar{Name: ganglease.EnvSecret, Value: ganglease.Secret(s.cfg.LeaseKey, j.ID)})
	}
	return secrets.WriteFile(s.secretsPath(j.ID), env)
}

// setChild records whether the job's supervisor is this process's child (or being
// started by it), which checkRunning leaves to Run.
func (s *Service) setChild(id string, child bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if child {
		s.children[id] = true
	} else {
		delete(s.children, id)
	}
}

func (s *Service) isChild(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.children[id]
}

func (s *Service) writeSpec(id string, job *v1.TrainJob) error {
	data, err := yaml.Marshal(job)
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	return os.WriteFile(s.specPath(id), data, 0o600)
}

// launch starts `trainyard run -f <spec>` with its output in the run folder's console
// log, on the standby when there is one (warm.go), and returns it and a wait for its end.
func (s *Service) launch(j *store.Job, gpus [][]int) (*exec.Cmd, func() error, error) {
	if err := rundir.MakeFolder(j.RunDir); err != nil {
		return nil, nil, err
	}
	log, err := os.OpenFile(LogPath(j), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, rundir.PermFor(j.RunDir).File)
	if err != nil {
		return nil, nil, fmt.Errorf("create console log: %w", err)
	}
	defer log.Close()
	spec, err := decodeSpec(j)
	if err != nil {
		return nil, nil, err
	}
	args := append(append([]string{"run"}, startWorkers(j, spec.Spec.WorkerCount())...), "-f", s.specPath(j.ID))
	cmd := exec.Command(s.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, j.RunDir
	_ = os.Remove(s.stopReasonPath(j.ID)) // a reason of an earlier stop (a preemption)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", secrets.EnvFile+"="+s.secretsPath(j.ID),
		preempt.EnvReason+"="+s.stopReasonPath(j.ID))
	if spec.Spec.MinWorkerCount() < spec.Spec.WorkerCount() {
		_ = os.Remove(s.resizePath(j.ID)) // a request to an earlier supervisor
		cmd.Env = append(cmd.Env, preempt.EnvResize+"="+s.resizePath(j.ID))
	}
	if ids := ganglease.Visible(gpus); ids != "" {
		cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+ids)
	}
	if started, wait, ok := s.handTo(j, spec, cmd, LogPath(j)); ok {
		return started, wait, nil
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start supervisor: %w", err)
	}
	return cmd, cmd.Wait, nil
}

// signal asks a job's supervisor to stop its gang, if it is still that job's supervisor
// (see supervises), and reports whether it sent the signal.
func (s *Service) signal(j *store.Job) bool {
	return j.SupervisorPID > 0 && s.supervising(j) && syscall.Kill(j.SupervisorPID, syscall.SIGTERM) == nil
}

// settle records how a running job whose supervisor ended went, from its run folder:
// finished, stopped, failed, or queued again to restart (see ended). waitErr is what
// waiting for the supervisor gave, nil for one this process did not start.
func (s *Service) settle(id string, waitErr error) {
	s.setChild(id, false)
	now := time.Now()
	j, err := s.cfg.Store.Update(id, func(j *store.Job) error {
		if j.Status == store.Running {
			ended(j, waitErr, now)
		}
		return nil
	})
	switch {
	case err != nil && !errors.Is(err, store.ErrNotFound):
		s.log.Error("record finished job", "job", id, "err", err)
	case err == nil && j.Status == store.Pending:
		s.log.Warn("job queued again", "job", id, "why", j.Message)
	}
	s.poke()
}

// outcome is how a job whose supervisor ended, with the run record rec (zero when there
// is none), ends: the phase and reason its supervisor wrote last.
func outcome(j *store.Job, rec rundir.Record, waitErr error) (store.Status, string) {
	switch {
	case rec.Phase == v1.PhaseSucceeded:
		return store.Succeeded, rec.Reason
	case rec.Phase == v1.PhaseFailed:
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
