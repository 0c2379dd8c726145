package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
)

// SameFailureEnv, set to 1 in a job's env, restarts a gang whose ranks all failed the
// same way before any report (see sameFailure), as any other failure; by default such a
// failure is the script's or its environment's, and restarting it would only repeat it.
const SameFailureEnv = "TRAINYARD_RESTART_SAME_FAILURE"

// tailBytes is how much of the end of a rank's log sameFailure reads for its last line.
const tailBytes = 4096

// ReportedBy records that rank reported in the current attempt (the reporting session's
// activity, see reporting.Session.OnActivity), and that it was heard from (TouchRank).
func (l *Launcher) ReportedBy(rank int) {
	l.reports.Add(1)
	l.TouchRank(rank)
}

// startFailure is how the ranks of an attempt that failed at their start failed: the
// exit code and last line they all had.
type startFailure struct {
	code int
	line string
}

// sameFailure says why attempt n failed the same way on every rank, at its start, so
// that the gang is not restarted: such a failure is the script's or its environment's
// (an ImportError, a missing file), not a fault that a restart cures. The ranks that
// count exited with the same non-zero code and the same last line of output, having
// printed nothing before their error (their log is a Python traceback, or that one line);
// every other rank was killed by the gang's stop (which says nothing of the failure), and
// no rank reported. It takes two such ranks in the attempt, or one whose failure the
// previous attempt had too (the stop often kills the others before they fail on their
// own). A gang that failed after it printed or reported anything (a collective's timeout,
// say) is restarted as before. It says "" then, or when the job's env sets SameFailureEnv.
func (l *Launcher) sameFailure(n int) string {
	prev := l.startFailed
	l.startFailed = startFailure{}
	if l.reports.Load() > 0 || restartSameFailure(l.Job) {
		return ""
	}
	rec := l.Folder.Record()
	if len(rec.Attempts) == 0 || rec.Attempts[len(rec.Attempts)-1].Number != n {
		return ""
	}
	failed, f := 0, startFailure{}
	for _, r := range rec.Attempts[len(rec.Attempts)-1].Ranks {
		if r.StoppedByTrainyard && r.Signal != "" {
			continue // killed by the gang's stop: it says nothing of the failure
		}
		if r.Signal != "" || r.ExitCode == nil || *r.ExitCode == 0 || r.Error != "" {
			return "" // killed (out of memory?), still running, succeeded, or never started
		}
		line, early := failureLine(l.Folder.Dir, r)
		if !early || line == "" || (failed > 0 && (startFailure{*r.ExitCode, line}) != f) {
			return ""
		}
		failed, f = failed+1, startFailure{*r.ExitCode, line}
	}
	if failed == 0 {
		return ""
	}
	l.startFailed = f
	switch {
	case failed >= 2:
		return fmt.Sprintf("%d ranks exited with code %d at their start, each saying %q: that is the script or its "+
			"environment, not a fault, so the gang is not restarted (set %s=1 in the job's env to restart it anyway)",
			failed, f.code, f.line, SameFailureEnv)
	case f == prev:
		return fmt.Sprintf("its ranks exited with code %d at their start in attempts %d and %d alike, saying %q: that is "+
			"the script or its environment, not a fault, so the gang is not restarted (set %s=1 in the job's env to "+
			"restart it anyway)", f.code, n-1, n, f.line, SameFailureEnv)
	}
	return ""
}

// restartSameFailure reports whether the job's env asks for restarts after a failure
// that sameFailure would stop at.
func restartSameFailure(job *v1.TrainJob) bool {
	for _, e := range job.Spec.Env {
		if e.Name == SameFailureEnv {
			return e.Value == "1" || strings.EqualFold(e.Value, "true")
		}
	}
	return false
}

// traceback is the first line of a Python traceback.
const traceback = "Traceback (most recent call last):"

// failureLine returns the last line of rank r's log in the run folder dir that is not
// blank, and whether the rank printed nothing before its error: its log's first line is
// a Python traceback's, or the log is that one line. It follows no link; "" when the log
// cannot be read.
func failureLine(dir string, r rundir.Rank) (string, bool) {
	if r.Log == "" || filepath.IsAbs(r.Log) || strings.Contains(r.Log, "..") {
		return "", false
	}
	f, err := os.OpenFile(filepath.Join(dir, r.Log), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", false
	}
	head, err := io.ReadAll(io.NewSectionReader(f, 0, min(info.Size(), tailBytes)))
	if err != nil {
		return "", false
	}
	off := max(0, info.Size()-tailBytes)
	tail, err := io.ReadAll(io.NewSectionReader(f, off, info.Size()-off))
	if err != nil {
		return "", false
	}
	lines := bytes.Split(bytes.TrimRight(tail, " \t\r\n"), []byte("\n"))
	last := strings.TrimSpace(string(lines[len(lines)-1]))
	first, _, _ := strings.Cut(strings.TrimLeft(string(head), " \t\r\n"), "\n")
	first = strings.TrimSpace(first)
	return last, first == traceback || first == last
}
