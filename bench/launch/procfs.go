package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procStat is what the benchmark reads from /proc/<pid>/stat.
type procStat struct {
	pid       int
	ppid      int
	startTime uint64 // clock ticks after boot; tells a reused pid apart
	cpu       uint64 // user and system time used, in clock ticks
}

// parseStat parses the text of /proc/<pid>/stat. The command name may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func parseStat(text string) (procStat, error) {
	open, end := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if open < 1 || end < open {
		return procStat{}, errors.New("parse stat: no command name")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(text[:open]))
	if err != nil {
		return procStat{}, fmt.Errorf("parse stat pid: %w", err)
	}
	f := strings.Fields(text[end+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return procStat{}, errors.New("parse stat: too few fields")
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("parse stat ppid: %w", err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse stat starttime: %w", err)
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	return procStat{pid: pid, ppid: ppid, startTime: start, cpu: utime + stime}, nil
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	return parseStat(string(b))
}

// allProcs reads the stat of every process, skipping those that vanish meanwhile.
func allProcs() ([]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

// descendants returns the processes below root, parents before their children.
func descendants(root int) ([]procStat, error) {
	procs, err := allProcs()
	if err != nil {
		return nil, err
	}
	children := map[int][]procStat{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procStat
	queue := []int{root}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out, nil
}

// readEnviron returns the environment of a process.
func readEnviron(pid int) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return nil, fmt.Errorf("read environ of %d: %w", pid, err)
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

// findRank returns the topmost descendant of root whose environment has RANK=rank, and
// that environment.
func findRank(root int, rank string) (int, map[string]string, error) {
	procs, err := descendants(root)
	if err != nil {
		return 0, nil, err
	}
	for _, p := range procs {
		if env, err := readEnviron(p.pid); err == nil && env["RANK"] == rank {
			return p.pid, env, nil
		}
	}
	return 0, nil, fmt.Errorf("no process with RANK=%s below pid %d", rank, root)
}

// tracker remembers every descendant of a launcher it has seen, so that whatever is left
// at the end can be killed even after it was re-parented.
type tracker struct {
	root int
	seen map[procStat]bool
}

// snapshot records the current descendants of the root.
func (t *tracker) snapshot() {
	procs, err := descendants(t.root)
	if err != nil {
		return
	}
	for _, p := range procs {
		t.seen[procStat{pid: p.pid, startTime: p.startTime}] = true
	}
}

// killAll sends SIGKILL to the root's process group and to every recorded descendant
// that is still the same process (same start time). Errors (already gone) are ignored.
func (t *tracker) killAll() {
	t.snapshot()
	_ = syscall.Kill(-t.root, syscall.SIGKILL)
	for p := range t.seen {
		if st, err := readStat(p.pid); err == nil && st.startTime == p.startTime {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}
