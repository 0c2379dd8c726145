package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// Observe reads a run's run.json as a reader outside the run should show it now: a run
// that says it is pending, running or restarting while no launcher holds its folder's
// lock, and whose launcher ran on this machine (Record.Host), lost its launcher without
// an end being recorded (SIGKILL, an out-of-memory kill, the machine going down); it is
// shown Interrupted, with that reason. Runs of other machines (a pod's) are shown as
// recorded. Starting the run again continues it.
func Observe(dir string) (Record, error) {
	rec, err := ReadRecord(dir)
	if err != nil || !rec.Phase.Active() || rec.Host == "" || rec.Host != hostname() {
		return rec, err
	}
	held, err := lockHeld(dir)
	if err != nil || held {
		return rec, nil // cannot tell: as recorded
	}
	how := "its launcher"
	if rec.Supervisor > 0 {
		how = fmt.Sprintf("its launcher (pid %d)", rec.Supervisor)
	}
	rec.Phase = v1.PhaseInterrupted
	rec.Reason = how + " is gone without recording how the run ended (killed by SIGKILL or out of memory, or the machine restarted); run it again to continue from its latest checkpoint"
	return rec, nil
}

// lockHeld says whether a process holds the run folder's lock (Open takes it for the
// run's lifetime): a shared lock taken and released at once would be refused.
func lockHeld(dir string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// hostname is this machine's name, "" when it cannot be read.
func hostname() string {
	h, _ := os.Hostname()
	return h
}
