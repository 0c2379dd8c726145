package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The crash test's child is this test binary, started with these variables (see TestMain).
const (
	envCrashChild  = "STORE_CRASH_CHILD"
	envCrashPath   = "STORE_CRASH_PATH"
	envCrashPrefix = "STORE_CRASH_PREFIX"
)

// deleted is what the child reports after deleting a job.
const deleted = "DELETED"

// lifecycle returns what the child does to its i-th job, in order, reporting each step once
// it is committed: create (Pending), two updates, and a delete for every fifth job.
func lifecycle(i int) []string {
	steps := []string{string(Pending), string(Running), string(Succeeded), deleted}
	if i%5 != 0 {
		return steps[:3]
	}
	return steps
}

// crashChild writes jobs to the store at path until it is killed, printing "ID STATUS" on
// stdout after each write returns. It returns an exit code only when something fails.
func crashChild(path, prefix string) int {
	s, err := Open(path, Options{Timeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		for step, st := range lifecycle(i) {
			if err := childStep(s, id, step, Status(st)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Printf("%s %s\n", id, st) // one write(2) to a pipe: whole or not at all
		}
	}
}

// childStep does step (an index into lifecycle) for job id.
func childStep(s *Store, id string, step int, st Status) error {
	switch {
	case step == 0:
		return s.Create(testJob(id).obj())
	case string(st) == deleted:
		return s.Delete(id)
	default:
		_, err := s.Update(id, func(j *Job) error {
			j.Status, j.Message = st, "step "+string(st)
			return nil
		})
		return err
	}
}

// report is what the child printed: the last committed step of each job, and the last job.
type report struct {
	last  map[string]string
	order []string
}

// TestCrashKeepsCommittedWrites kills a process that writes to the store with SIGKILL at
// random points, three times on the same file, and checks after each kill that the file
// opens, passes bbolt's check, and holds every write the process saw committed.
func TestCrashKeepsCommittedWrites(t *testing.T) {
	path := statePath(t)
	rep := report{last: map[string]string{}}
	for round := range 3 {
		lines := runChildAndKill(t, path, fmt.Sprintf("r%d", round), 200*time.Millisecond)
		if len(lines) == 0 {
			t.Fatalf("round %d: the child committed nothing before it was killed", round)
		}
		for _, l := range lines {
			id, st, _ := strings.Cut(l, " ")
			if _, seen := rep.last[id]; !seen {
				rep.order = append(rep.order, id)
			}
			rep.last[id] = st
		}
		s, err := Open(path, Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("round %d: open after SIGKILL: %v", round, err)
		}
		checkFile(t, s)
		checkIndex(t, s)
		checkReported(t, s, rep)
		rep.settle(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d writes reported committed before SIGKILL, checked", round, len(lines))
	}
}

// runChildAndKill starts the child on path, lets it write for about d after its first
// commit, kills it with SIGKILL, and returns the whole lines it printed.
func runChildAndKill(t *testing.T, path, prefix string, d time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCrashChild+"=1", envCrashPath+"="+path, envCrashPrefix+"="+prefix)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	linesc := make(chan []string)
	go func() { linesc <- readLines(out, first) }()
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Error("the child printed nothing in 30s")
	}
	time.Sleep(d)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lines := <-linesc
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, not by SIGKILL; stderr:\n%s", err, stderr.String())
	}
	return lines
}

// readLines reads r to its end, closing first at the first line, and returns the lines
// that ended with a newline.
func readLines(r io.Reader, first chan<- struct{}) []string {
	var lines []string
	br := bufio.NewReader(r)
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			break // io.EOF, or a cut last line: not reported as committed
		}
		if lines = append(lines, strings.TrimSuffix(l, "\n")); len(lines) == 1 {
			close(first)
		}
	}
	if len(lines) == 0 {
		close(first)
	}
	return lines
}

// settle takes what is stored of the jobs that checkReported allows to be ahead of the
// report (the last one reported, one just created) as reported, since they are committed.
func (rep *report) settle(t *testing.T, s *Store) {
	all, err := s.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	rep.last[rep.order[len(rep.order)-1]] = storedStep(t, s, rep.order[len(rep.order)-1])
	for _, j := range all {
		if _, ok := rep.last[j.ID]; !ok {
			rep.order = append(rep.order, j.ID)
			rep.last[j.ID] = string(j.Status)
		}
	}
}

// checkReported checks that the store holds the last reported step of every job. The
// child may have been killed after a commit and before it printed it, so the last job
// reported may be one step further, and one job never reported may exist (just created).
func checkReported(t *testing.T, s *Store, rep report) {
	t.Helper()
	lastID := rep.order[len(rep.order)-1]
	for id, st := range rep.last {
		got := storedStep(t, s, id)
		if got == st || id == lastID && got == nextStep(t, id, st) {
			continue
		}
		t.Errorf("job %s: stored %s, but the child reported %s committed", id, got, st)
	}
	all, err := s.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var unreported []string
	for _, j := range all {
		if _, ok := rep.last[j.ID]; !ok {
			unreported = append(unreported, j.ID+" "+string(j.Status))
		}
	}
	if len(unreported) > 1 || len(unreported) == 1 && !strings.HasSuffix(unreported[0], " "+string(Pending)) {
		t.Errorf("jobs never reported: %v, want at most one just created", unreported)
	}
}

// storedStep returns the job's status, or deleted when it is not there.
func storedStep(t *testing.T, s *Store, id string) string {
	j, err := s.Get(id)
	if errors.Is(err, ErrNotFound) {
		return deleted
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(j.Status)
}

// nextStep returns the step after st in the lifecycle of job id, or st when it is the last.
func nextStep(t *testing.T, id, st string) string {
	n, err := strconv.Atoi(id[strings.LastIndex(id, "-")+1:])
	if err != nil {
		t.Fatalf("job ID %q: %v", id, err)
	}
	steps := lifecycle(n)
	if i := slices.Index(steps, st); i >= 0 && i+1 < len(steps) {
		return steps[i+1]
	}
	return st
}
