package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Workload knobs shared by both launchers.
const (
	ranks        = 2    // processes per gang
	killAtStep   = 30   // restart trials kill rank 1 once rank 0 logged this step
	steadyFrom   = 20   // the step-time median takes rank 0's steps from this one on
	sleepPerStep = 0.05 // --sleep-per-step of restart trials, in seconds
	firstStepMsg = "first step done"
)

// torchrunStdio is torchrun's --redirects and --tee value: rank 1's stdout goes through
// torchrun's log tailer, prefixed "[default1]:", while rank 0 writes straight to the
// inherited stdout as with torchrun's defaults, so unprefixed lines are rank 0's. The
// defaults ("0") crash torchrun 1.13 on Python 3.11: Std.from_str maps "0" and "3" to
// None there, as IntFlag iteration skips them.
const torchrunStdio = "1:1"

// trialKind says what a trial measures.
type trialKind int

// The two kinds of trial.
const (
	plainRun   trialKind = iota // launch to first step, steady-state step time
	restartRun                  // SIGKILL of rank 1 to the restarted gang's first step
)

// String names the kind in the raw output.
func (k trialKind) String() string {
	if k == restartRun {
		return "restart"
	}
	return "run"
}

// launcher is one of the two programs under test.
type launcher struct {
	name string
	// argv returns the command line of a trial that keeps its files in dir, with a
	// rendezvous port (used by torchrun only) and a maximum number of restarts.
	argv func(cfg *config, dir, port string, restarts int, script []string) []string
	// rank0 returns the text of a stdout line without its prefix, if rank 0 wrote it.
	rank0 func(line string) (string, bool)
	// plainOnly: it runs no restart trials.
	plainOnly bool
}

// launchers are the programs under test, in the order each round runs them.
var launchers = []launcher{
	{name: "trainyard", argv: trainyardArgv, rank0: trainyardRank0},
	{name: "torchrun", argv: torchrunArgv, rank0: torchrunRank0},
}

// launchersFor are the launchers of trials of kind k: with -bare and -server, the bare
// ranks and the server run plain trials too.
func (c *config) launchersFor(k trialKind) []launcher {
	out := append([]launcher{}, launchers...)
	if c.bare && k == plainRun {
		out = append(out, bareLauncher)
	}
	if c.server && k == plainRun {
		out = append(out, serverLauncher)
	}
	return out
}

// trainyardArgv is `trainyard run` with a run folder of its own under dir.
func trainyardArgv(cfg *config, dir, _ string, restarts int, script []string) []string {
	argv := []string{cfg.trainyard, "run", "--workers", strconv.Itoa(ranks),
		"--storage-path", dir, "--name", "bench", "--max-restarts", strconv.Itoa(restarts),
		"--", cfg.python}
	return append(argv, script...)
}

// torchrunArgv is torchrun with a rendezvous port and log folder of its own. It runs the
// script with its own interpreter (/usr/bin/torchrun is a Python 3 script).
func torchrunArgv(cfg *config, dir, port string, restarts int, script []string) []string {
	argv := []string{cfg.torchrun, "--redirects", torchrunStdio, "--tee", torchrunStdio,
		"--log_dir", filepath.Join(dir, "torchrun-logs"), "--nproc_per_node", strconv.Itoa(ranks),
		"--max_restarts", strconv.Itoa(restarts)}
	if cfg.rdzv == "c10d" {
		argv = append(argv, "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:"+port)
	} else {
		argv = append(argv, "--master_port", port)
	}
	return append(argv, script...)
}

// scriptArgs are train.py and its arguments for a trial of kind k.
func scriptArgs(cfg *config, k trialKind) []string {
	args := []string{cfg.script, "--log-steps", "--train-subset", "3200",
		"--test-subset", "200", "--epochs", "1"}
	if k == restartRun {
		args = append(args, "--sleep-per-step", strconv.FormatFloat(sleepPerStep, 'f', -1, 64))
	}
	return args
}

// restartsFor is the maximum number of restarts of a trial of kind k.
func restartsFor(k trialKind) int {
	if k == restartRun {
		return 1
	}
	return 0
}

// trainyardPrefix matches the console prefix of rank 0's lines.
var trainyardPrefix = regexp.MustCompile(`^\[rank 0 pid \d+\] `)

// trainyardRank0 strips "[rank 0 pid P] " from rank 0's console lines.
func trainyardRank0(line string) (string, bool) {
	loc := trainyardPrefix.FindStringIndex(line)
	if loc == nil {
		return "", false
	}
	return line[loc[1]:], true
}

// torchrunRank0 takes unprefixed lines (see torchrunStdio) and "[default0]:" ones as
// rank 0's; "[defaultN]:" lines are rank N's.
func torchrunRank0(line string) (string, bool) {
	if rest, ok := strings.CutPrefix(line, "[default0]:"); ok {
		return rest, true
	}
	if strings.HasPrefix(line, "[default") {
		return "", false
	}
	return line, true
}

// stepLine matches the script's per-step line.
var stepLine = regexp.MustCompile(`^step (\d+) time (\S+) loss \S+$`)

// parseStep returns the step number and its time in seconds from a rank's step line.
func parseStep(text string) (step int, seconds float64, ok bool) {
	m := stepLine.FindStringSubmatch(text)
	if m == nil {
		return 0, 0, false
	}
	step, err1 := strconv.Atoi(m[1])
	seconds, err2 := strconv.ParseFloat(m[2], 64)
	return step, seconds, err1 == nil && err2 == nil
}
