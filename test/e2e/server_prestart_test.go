package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A server with --prestart keeps the next job's Pythons warm: after a DDP job started, a
// standby shaped like it waits with one Python per rank, torch imported; the next job of
// that shape runs its ranks on them (and trains to the end), a job of another shape
// starts afresh and leaves it alone, after which (--prestart-shapes 2) jobs of both
// shapes run warm; the server's stop takes the standbys and their Pythons with it.
func TestServerPrestart(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	s := newJobServer(t, dir, "--prestart", "--prestart-shapes", "2")
	t.Cleanup(func() { s.stopJobs(t) })
	script := filepath.Join(repoRoot(t), "examples", "fashion-mnist", "train.py")
	submit := func(workdir, workers string, more ...string) (string, string) {
		t.Helper()
		args := append([]string{"--workdir", workdir, "--workers", workers, "--", python, script, "--epochs", "1", "--train-subset", "640",
			"--test-subset", "200"}, more...)
		code, out := s.cli(t, "submit", args...)
		if code != 0 || !strings.Contains(out, "done: final test_accuracy") {
			t.Fatalf("submit %v: exit %d, want 0 and a trained model:\n%s\nserver:\n%s", args, code, out, s.out)
		}
		return strings.TrimSuffix(strings.Fields(strings.SplitN(out, "submitted job ", 2)[1])[0], ";"), out
	}
	const warm = "run on prestarted Pythons"

	// The first job starts in a folder that is gone by the time the next one comes (a
	// temporary one): the standby shaped like it must not depend on it.
	gone := t.TempDir()
	first, out := submit(gone, "2")
	if strings.Contains(out, warm) {
		t.Errorf("the server's first job ran on prestarted Pythons:\n%s", out)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	_, spares := waitStandby(t, dir, 2, time.Minute)
	for _, pid := range spares {
		env := environOf(t, pid)
		if strings.Contains(env, "TRAINYARD_SECRETS_FILE") || strings.Contains(env, "TRAINYARD_GPU_LEASE_SECRET") ||
			!strings.Contains(env, "OMP_NUM_THREADS=") {
			t.Errorf("a spare's environment: want the ranks' variables and no secrets file:\n%s", env)
		}
		if !strings.Contains(env, dir) { // what loneSpares finds this server's spares by
			t.Errorf("a spare's environment does not name the server's folder %s:\n%s", dir, env)
		}
	}

	second, out := submit(dir, "2", "--seed", "7")
	if !strings.Contains(out, "attempt 1: 2 of 2 rank(s) "+warm) {
		t.Fatalf("the second job of the same shape did not run on the standby's Pythons:\n%s\nstandby log:\n%s", out,
			readFile(t, filepath.Join(dir, "state", "standby.log")))
	}
	rec := readRecord(t, filepath.Join(dir, "runs", second))
	for _, r := range rec.Attempts[0].Ranks {
		if !r.Prestarted || !slices.Contains(spares, r.PID) {
			t.Errorf("rank %d ran as pid %d (prestarted %v); the standby's Pythons were %v", r.Rank, r.PID, r.Prestarted, spares)
		}
	}
	if first == second {
		t.Fatal("one job ID for two jobs")
	}

	// A job of another shape (one rank, which would not fit the standby's rank 0: two
	// ranks share the machine there) starts afresh and leaves the standby waiting; then
	// (--prestart-shapes 2) a standby of each shape waits, and jobs of both shapes run warm.
	waitStandby(t, dir, 2, time.Minute)
	third, out := submit(dir, "1")
	if strings.Contains(out, warm) {
		t.Errorf("a one-rank job ran on the Pythons of a two-rank standby:\n%s", out)
	}
	if lone := loneSpares(t, dir); len(lone) != 0 {
		t.Errorf("spare Python(s) outlived the job %s that did not use them:\n%s\nserver:\n%s", third, describe(lone), s.out)
	}
	waitStandby(t, dir, 1, time.Minute)
	if sbs := standbys(t, dir); len(sbs) != 2 {
		t.Errorf("standbys after jobs of two shapes: %v; want one of each", sbs)
	}
	for _, workers := range []string{"2", "1"} {
		if _, out := submit(dir, workers); !strings.Contains(out, "rank(s) "+warm) {
			t.Errorf("a %s-worker job, with standbys of both shapes waiting, did not run on prestarted Pythons:\n%s", workers, out)
		}
	}

	waitStandby(t, dir, 1, time.Minute)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		sbs := standbys(t, dir)
		if len(sbs) == 0 && len(loneSpares(t, dir)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the server stopped, its standbys %v or spare Pythons are still there", sbs)
		}
	}
}

// waitStandby waits until the server in dir has a standby with n spare Pythons, and
// returns the standby's pid and theirs.
func waitStandby(t *testing.T, dir string, n int, timeout time.Duration) (int, []int) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for sb, spares := range standbys(t, dir) {
			if len(spares) == n {
				return sb, spares
			}
		}
	}
	t.Fatalf("no standby with %d spare Python(s) within %s; its log:\n%s", n, timeout,
		readFile(t, filepath.Join(dir, "state", "standby.log")))
	return 0, nil
}

// standbys maps the pid of every standby of the server in dir to its children's.
func standbys(t *testing.T, dir string) map[int][]int {
	t.Helper()
	out := map[int][]int{}
	for _, pid := range pids(t) {
		cmd := cmdlineOf(pid)
		if strings.Contains(cmd, "run --standby") && strings.Contains(cmd, dir) {
			out[pid] = childrenOf(t, pid)
		}
	}
	return out
}

// loneSpares are the spare Pythons of the server in dir (their environment names dir:
// the tests beside this one, and the test cluster's pods, have spares too) whose parent
// is no standby: a launcher's spares for a restart, or leftovers.
func loneSpares(t *testing.T, dir string) []int {
	t.Helper()
	var out []int
	for _, pid := range pids(t) {
		env, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ")) // it may be gone
		if !strings.Contains(cmdlineOf(pid), "trainyard: a spare Python") || !strings.Contains(string(env), dir) {
			continue
		}
		if ppid := parentOf(pid); !strings.Contains(cmdlineOf(ppid), "run --standby") {
			out = append(out, pid)
		}
	}
	return out
}

// describe says of each process its pid, state, parent and the parent's command line.
func describe(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		stat, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		_, after, _ := strings.Cut(string(stat), ") ")
		ppid := parentOf(pid)
		fmt.Fprintf(&b, "  pid %d (%.1s), parent %d: %q\n", pid, after, ppid, cmdlineOf(ppid))
	}
	return b.String()
}

func pids(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func cmdlineOf(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

func environOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "\x00", "\n")
}

func parentOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	text := string(b)
	f := strings.Fields(text[strings.LastIndexByte(text, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func childrenOf(t *testing.T, parent int) []int {
	t.Helper()
	var out []int
	for _, pid := range pids(t) {
		if parentOf(pid) == parent {
			out = append(out, pid)
		}
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}
