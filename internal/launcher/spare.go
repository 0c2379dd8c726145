package launcher

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// A restart's ranks start from prestarted Python processes, "spares": once a rank of an
// attempt has printed something (its imports done, most likely: scripts often print on
// rank 0 only), or prestartAfter since the attempt began, the launcher starts one more
// Python per rank that imports torch and then waits. When the attempt fails and
// the gang restarts, each rank of the next attempt is handed to its spare (its
// environment, arguments and folder, through a pipe), which runs the script as `python
// script.py` would (runpy, as __main__) without importing torch again: importing torch is
// most of a rank's start. A spare is used only for the same process of its machine on
// the same GPUs with the same import-time environment (its rank may differ: a resize
// renumbers the ranks); otherwise, and when the run ends, it is killed. Only
// a command that runs a Python script or module (`python3 [flags] script.py ...`,
// `python3 -m module ...`) gets spares. Ray prestarts its workers in the same spirit.

// PrestartEnv is the job's variable that turns spares off: 0 (or false); 1 (or true) is
// the default.
const PrestartEnv = "TRAINYARD_PRESTART"

// prestartSetting reads PrestartEnv from the job's env.
func prestartSetting(job *v1.TrainJob) (bool, error) {
	for _, e := range job.Spec.Env {
		if e.Name != PrestartEnv {
			continue
		}
		switch strings.ToLower(e.Value) {
		case "0", "false":
			return false, nil
		case "1", "true", "":
			return true, nil
		}
		return false, fmt.Errorf("env %s=%q: want 1 (a restart's ranks start from prestarted Pythons, the default) or 0 (they start afresh)", PrestartEnv, e.Value)
	}
	return true, nil
}

// spareCode is what a spare runs (python -c): import torch, wait for the rank to run on
// fd 3, take its environment, arguments and folder, and run it. Stdlib only. Until the
// rank's script runs, the working folder is not on sys.path (python -c puts it first), so
// a module planted there (torch.py, json.py) is not imported; the script then gets the
// sys.path[0] that python would give it, its own folder or, for -m, the working folder.
const spareCode = `# trainyard: a spare Python, which runs the rank the launcher hands it on fd 3
import os, sys
safe_path = getattr(sys.flags, "safe_path", False)  # -P, PYTHONSAFEPATH (3.11+)
if not safe_path:
    del sys.path[0]  # -c put the working folder first: import nothing from it (another user's torch.py, say)
try:
    import torch  # the import a spare saves its rank
except BaseException:
    pass
import json, runpy
with os.fdopen(3, "rb") as f:
    spec = f.read()
if not spec:
    sys.exit(0)
spec = json.loads(spec)
if spec.get("ppid"):
    try:  # die with the launcher, as its other ranks do (a standby's spares start without)
        import ctypes, signal
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != spec["ppid"]:
        sys.exit(1)  # the launcher died before that
if spec.get("cmdline"):
    try:  # ps shows the rank's command line, not this program: rewrite argv's memory
        import ctypes
        with open("/proc/self/stat", "rb") as f:
            stat = f.read().rsplit(b")", 1)[1].split()
        start, end = int(stat[45]), int(stat[46])  # arg_start, arg_end
        title = b"\0".join(os.fsencode(a) for a in spec["cmdline"])[:end - start - 1]
        ctypes.memmove(start, title + bytes(end - start - len(title)), end - start)
    except Exception:
        pass
os.environ.clear()
os.environ.update(spec["env"])
if spec["cwd"]:
    os.chdir(spec["cwd"])
sys.argv = spec["argv"]


def excepthook(kind, value, tb, show=sys.excepthook):
    # A traceback starts at the rank's own code, as a rank started afresh shows it: not
    # at this program's frame and runpy's (<frozen runpy>).
    while tb is not None and (tb.tb_frame.f_code.co_filename in ("<string>", "<frozen runpy>")
                              or tb.tb_frame.f_code.co_filename.endswith("runpy.py")):
        tb = tb.tb_next
    if isinstance(value, BaseException):
        value.__traceback__ = tb  # what Python prints, whatever tb says
    show(kind, value, tb)


sys.excepthook = excepthook
if spec["module"]:
    if not safe_path:
        sys.path.insert(0, os.getcwd())
    runpy.run_module(spec["module"], run_name="__main__", alter_sys=True)
else:
    if not safe_path:
        sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
    runpy.run_path(sys.argv[0], run_name="__main__")
`

// pythonRun is a command that runs a Python script or module: the interpreter's flags,
// then the script (or module) and its arguments.
type pythonRun struct {
	flags  []string // before the script: -u, -X dev, -W error
	module string   // -m's module, or ""
	argv   []string // sys.argv: the script (or "-m"'s module name) and its arguments
}

// parsePython reads args (the command and its arguments) as a Python run, if it is one.
func parsePython(args []string) (pythonRun, bool) {
	if len(args) < 2 || !pythonName.MatchString(filepath.Base(args[0])) {
		return pythonRun{}, false
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-m" && i+1 < len(args):
			return pythonRun{flags: args[1:i], module: args[i+1], argv: append([]string{args[i+1]}, args[i+2:]...)}, true
		case a == "-X" || a == "-W":
			i++ // its value
		case strings.HasPrefix(a, "-X") || strings.HasPrefix(a, "-W"):
		case slices.Contains([]string{"-u", "-B", "-O", "-OO", "-s", "-b", "-bb", "-d", "-v", "-q", "-R"}, a):
		case strings.HasPrefix(a, "-"):
			return pythonRun{}, false // -c, -, -i, -I and anything we do not know
		default:
			return pythonRun{flags: args[1:i], argv: args[i:]}, true
		}
	}
	return pythonRun{}, false
}

// spare is a prestarted Python waiting for a rank to run.
type spare struct {
	proc    Proc
	path    string    // the Python it runs
	py      pythonRun // how the job's command runs Python: its flags matter
	env     []string
	os      *os.Process // this launcher's child
	out     *os.File    // the read end of its stdout and stderr
	handoff *os.File    // the write end of the pipe it reads the rank from (its fd 3)
	// pooled is set for a spare a job server's standby started for whatever job came
	// next (see pool.go): it may run a rank on other GPUs.
	pooled bool
}

// spares holds the launcher's spares, by index in the attempt's process list.
type spares struct {
	mu  sync.Mutex
	set map[int]*spare
}

// startSpare starts a spare for process p of the next attempt: path with the run's
// Python flags, in dir, with env (this attempt's: what matters at import is the same).
// A pooled spare (a standby's) gets no parent-death signal, which the standby's exec
// would send, as it ends the thread that started the spare: a spare whose parent dies
// exits anyway, at the end of its fd 3.
func startSpare(path string, py pythonRun, dir string, env []string, p Proc, pooled bool) (*spare, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	hr, hw, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	args := append(append([]string{path}, py.flags...), "-c", spareCode)
	cmd := &exec.Cmd{Path: path, Args: args, Dir: dir, Env: env, Stdout: w, Stderr: w, ExtraFiles: []*os.File{hr},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
	if pooled {
		cmd.SysProcAttr.Pdeathsig = 0
	}
	err = cmd.Start()
	w.Close()
	hr.Close()
	if err != nil {
		r.Close()
		hw.Close()
		return nil, fmt.Errorf("prestart rank %d: %w", p.Rank, err)
	}
	return &spare{proc: p, path: path, py: py, env: env, os: cmd.Process, out: r, handoff: hw, pooled: pooled}, nil
}

// kill stops a spare that will not be used and reaps it.
func (s *spare) kill() {
	_ = syscall.Kill(-s.os.Pid, syscall.SIGKILL)
	s.handoff.Close()
	s.out.Close()
	go func() { _, _ = s.os.Wait() }()
}

// misfit says why the spare cannot run process p of a command that runs Python as path
// and py do, with env, or "" when it can: that takes the same Python and flags, the same
// process of its machine on the same GPUs (its rank may differ: a resize renumbers
// them), and no variable read while importing torch changed. A pooled
// spare may run the rank on other GPUs: importing torch does not initialize CUDA, which
// reads the GPUs' variables when the rank first uses a GPU.
func (s *spare) misfit(path string, py pythonRun, p Proc, env []string) string {
	if s.path != path || !slices.Equal(s.py.flags, py.flags) {
		return fmt.Sprintf("Python: %s %q for the spare, %s %q for the rank", s.path, s.py.flags, path, py.flags)
	}
	a, b := s.proc, p
	a.Attempt, b.Attempt, a.MasterPort, b.MasterPort = 0, 0, 0, 0
	// A resize renumbers the ranks: the rank, its worker and node and their number only
	// reach the process in the environment it is handed.
	a.Rank, b.Rank, a.Worker, b.Worker, a.Node, b.Node, a.Nodes, b.Nodes = 0, 0, 0, 0, 0, 0, 0, 0
	if !s.pooled && (!slices.Equal(a.GPUs, b.GPUs) || !slices.Equal(a.WorkerGPUs, b.WorkerGPUs)) {
		return "it was started for other GPUs"
	}
	a.GPUs, b.GPUs, a.WorkerGPUs, b.WorkerGPUs = nil, nil, nil, nil
	if s.pooled {
		a.Device, b.Device = 0, 0
	}
	if why := procDiff(a, b); why != "" {
		return why
	}
	old, cur := parseEnv(s.env), parseEnv(env)
	for _, vars := range []map[string]string{old, cur} {
		for k := range vars {
			if old[k] != cur[k] && importTime(k) && !(s.pooled && gpuChoice(k)) {
				return fmt.Sprintf("%s: %q for the spare, %q for the rank (read while torch is imported)", k, old[k], cur[k])
			}
		}
	}
	return ""
}

// procWords names Proc's fields in the user's words, for misfit's messages.
var procWords = map[string]string{
	"LocalRank":    "local rank",
	"MasterAddr":   "rendezvous address",
	"Device":       "GPU index",
	"HostProcs":    "processes on this machine",
	"HostMilliCPU": "CPU of this machine's processes (millicores)",
}

// procDiff says in which of Proc's fields a (the spare's) and b (the rank's) differ, with
// both values ("processes on this machine: 3 for the spare, 2 for the rank"), or "".
func procDiff(a, b Proc) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		x, y := fmt.Sprint(va.Field(i).Interface()), fmt.Sprint(vb.Field(i).Interface())
		if x != y {
			name := va.Type().Field(i).Name
			if w, ok := procWords[name]; ok {
				name = w
			}
			out = append(out, fmt.Sprintf("%s: %s for the spare, %s for the rank", name, x, y))
		}
	}
	return strings.Join(out, "; ")
}

// gpuChoice reports whether a variable only says which GPUs a process uses: CUDA reads
// it when it initializes, not when torch is imported.
func gpuChoice(name string) bool {
	return name == "CUDA_VISIBLE_DEVICES" || name == "NVIDIA_VISIBLE_DEVICES" || name == "ROCR_VISIBLE_DEVICES" ||
		name == "HIP_VISIBLE_DEVICES"
}

// importTime reports whether a variable may be read when Python starts or imports torch
// (so a spare started with another value cannot run the rank).
func importTime(name string) bool {
	for _, p := range []string{"PYTHON", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "TORCH_", "LD_", "MALLOC_", "CUDA_", "NVIDIA_", "HIP_", "ROCR_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return name == "PATH" || name == "HOME" || name == "LANG" || strings.HasPrefix(name, "LC_")
}

// hand gives the spare its rank: env, the command's argv (py) and folder (dir, else
// this process's), then closes the pipe. The spare then sets its parent-death signal
// (SIGKILL), which a standby's spares start without, so that every rank dies with its
// launcher, and, when cmdline is set (the command line the rank would have started
// with), writes it over its own arguments' memory, so that ps, pgrep -f and py-spy show
// the rank's command rather than the spare's program (as setproctitle does; it fits, the
// spare's program being longer than any usual command line, else it is cut).
func (s *spare) hand(dir string, env []string, py pythonRun, cmdline []string) error {
	if dir == "" {
		dir, _ = os.Getwd() // a pooled spare started elsewhere
	}
	b, err := json.Marshal(map[string]any{"env": parseEnv(env), "argv": py.argv, "module": py.module, "cwd": dir,
		"ppid": os.Getpid(), "cmdline": cmdline})
	if err == nil {
		_, err = s.handoff.Write(b)
	}
	if cerr := s.handoff.Close(); err == nil {
		err = cerr
	}
	return err
}

// take removes and returns the spare for index i, if it fits p and env for a command
// that runs Python as path and py do. A spare that does not fit is killed, and take says
// why.
func (ss *spares) take(i int, path string, py pythonRun, p Proc, env []string) (*spare, string) {
	ss.mu.Lock()
	s := ss.set[i]
	delete(ss.set, i)
	ss.mu.Unlock()
	if s == nil {
		return nil, ""
	}
	if why := s.misfit(path, py, p, env); why != "" {
		s.kill()
		return nil, why
	}
	return s, ""
}

// put keeps s for index i, killing the one it replaces.
func (ss *spares) put(i int, s *spare) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.set == nil {
		ss.set = map[int]*spare{}
	}
	if old := ss.set[i]; old != nil {
		old.kill()
	}
	ss.set[i] = s
}

// drop kills every spare.
// count is how many spares there are.
func (ss *spares) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.set)
}

func (ss *spares) drop() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for i, s := range ss.set {
		s.kill()
		delete(ss.set, i)
	}
}

// prestartPoll is how often an attempt looks whether a rank has spoken.
const prestartPoll = 100 * time.Millisecond

// prestartAfter is when an attempt none of whose ranks printed anything gets its spares.
const prestartAfter = 10 * time.Second

// prestart starts the spares of the next attempt once a rank of this one has printed
// something, or prestartAfter after it began, unless the attempt ends first (done).
func (a *attempt) prestart(py pythonRun, envs [][]string, done <-chan struct{}) {
	t := time.NewTicker(prestartPoll)
	defer t.Stop()
	late := time.After(prestartAfter)
	for spoke := false; !spoke; {
		select {
		case <-done:
			return
		case <-late:
			spoke = true
		case <-t.C:
			for _, pr := range a.procs {
				spoke = spoke || pr != nil && pr.spoke.Load()
			}
		}
	}
	if why := a.spareMemory(); why != "" {
		a.l.notice("attempt %d: no prestarted Pythons for the next attempt: %s", a.number, why)
		return
	}
	for i, pr := range a.procs {
		if pr == nil {
			continue // it never started
		}
		s, err := startSpare(a.l.path, py, a.l.Job.Spec.WorkingDir, envs[i], pr.proc, false)
		if err != nil {
			a.l.Logger.Warn("no spare for the next attempt", "rank", pr.proc.Rank, "err", err)
			return
		}
		a.l.spares.put(i, s)
	}
}

// spareMemory says why this attempt's spares would not fit in the memory limit of the
// launcher's cgroup (spareRoom), or "".
func (a *attempt) spareMemory() string {
	use, ok := cgroupMemory("/")
	if !ok {
		return ""
	}
	var anon int64
	for _, pr := range a.procs {
		if pr != nil {
			anon += rssAnon("/", pr.pid)
		}
	}
	return spareRoom(use, anon)
}
