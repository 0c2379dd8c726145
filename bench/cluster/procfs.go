package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// proc is a process as the benchmark sees it in the host's /proc: pods' processes are
// there too, so one search finds a rank under `trainyard run` and in a pod alike.
type proc struct {
	pid, ppid int
	argv      []string
	env       map[string]string
}

// readProc reads a process's parent, command line and environment.
func readProc(pid int) (proc, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return proc{}, err
	}
	// The command name may hold spaces and parentheses: count fields from the last ')'.
	end := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[end+1:]))
	if end < 0 || len(f) < 2 {
		return proc{}, fmt.Errorf("parse %s/stat", dir)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return proc{}, fmt.Errorf("parse %s/stat: %w", dir, err)
	}
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return proc{}, err
	}
	environ, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return proc{}, err
	}
	p := proc{pid: pid, ppid: ppid, argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), env: map[string]string{}}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			p.env[k] = v
		}
	}
	return p, nil
}

// allProcs reads every process, skipping those that vanish meanwhile.
func allProcs() []proc {
	entries, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := readProc(pid); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// findRank returns the topmost process running the benchmark's script with marks as its
// --marks folder and RANK=rank in its environment.
func findRank(marks, rank string) (proc, error) {
	procs := allProcs()
	match := func(p proc) bool {
		return p.env["RANK"] == rank && slices.Contains(p.argv, marks) && slices.ContainsFunc(p.argv, func(a string) bool {
			return strings.HasSuffix(a, "ddp.py")
		})
	}
	byPid := map[int]proc{}
	for _, p := range procs {
		byPid[p.pid] = p
	}
	for _, p := range procs {
		if match(p) && !match(byPid[p.ppid]) {
			return p, nil
		}
	}
	return proc{}, fmt.Errorf("no process with RANK=%s and --marks %s", rank, marks)
}

// launcherOf returns the nearest ancestor of p that runs the trainyard binary (in a pod:
// `trainyard worker`, the container's first process).
func launcherOf(p proc) (proc, error) {
	for pid := p.ppid; pid > 1; {
		a, err := readProc(pid)
		if err != nil {
			return proc{}, err
		}
		if len(a.argv) > 0 && filepath.Base(a.argv[0]) == "trainyard" {
			return a, nil
		}
		pid = a.ppid
	}
	return proc{}, fmt.Errorf("no trainyard process above pid %d", p.pid)
}

// runProcs returns every process whose --marks folder is marks (what a local trial
// leaves if its launcher is gone).
func runProcs(marks string) []proc {
	var out []proc
	for _, p := range allProcs() {
		if slices.Contains(p.argv, marks) {
			out = append(out, p)
		}
	}
	return out
}
