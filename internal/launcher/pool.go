package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// A job server keeps the next job's Pythons warm: after it starts a job, it starts a
// standby, `trainyard run --standby -f <that job's spec>`, which starts a spare for each
// rank of that job's first attempt (Standby) and waits. When the server places a job of
// that shape (WarmShape), it hands the standby that job's command line, environment and
// folder; the standby
// hands its spares over (HandOver) and becomes the job's supervisor by exec, keeping its
// pid and so its children. The supervisor adopts the spares (TakeSpares) and runs each
// rank of its first attempt on the spare that fits it (spare.misfit): the same Python,
// flags, rank and import-time environment, on any GPUs; a spare that does not fit is
// killed, and the rank starts afresh. Ray keeps a pool of started workers in the same
// spirit. A standby whose server goes away (its stdin closes) kills its spares and
// exits; a spare whose parent dies reads the end of its pipe and exits.

// SparesEnv is the variable through which a standby tells the supervisor it becomes which
// of its descriptors hold the spares' description (see HandOver).
const SparesEnv = "TRAINYARD_STANDBY_SPARES"

// Spares are the spares a supervisor adopted from the standby it was (TakeSpares).
type Spares struct {
	set map[int]*spare
}

// handedSpare is one spare as HandOver describes it to the process after exec.
type handedSpare struct {
	Index   int      `json:"index"`
	PID     int      `json:"pid"`
	Out     int      `json:"out"`     // the descriptor of its output's read end
	Handoff int      `json:"handoff"` // the descriptor of the write end of its fd 3
	Path    string   `json:"path"`
	Flags   []string `json:"flags"`
	Env     []string `json:"env"`
	Proc    Proc     `json:"proc"`
}

// KeepsWarm reports whether a standby can keep Pythons warm for jobs shaped like job: its
// command runs a Python script or module, and it does not turn spares off (PrestartEnv).
func KeepsWarm(job *v1.TrainJob) bool {
	s := &job.Spec
	if on, _ := prestartSetting(job); !on || len(s.Command) == 0 {
		return false
	}
	_, ok := parsePython(append(slices.Clone(s.Command), s.Args...))
	return ok
}

// WarmShape is a key of what decides whether a standby started for one job can run the
// ranks of another whose first attempt starts workers workers: the Python and its flags,
// the number of workers and of processes per worker, and the variables of the job read
// at import (GPUs and the script do not matter). Jobs of one key fit each other's
// standby, unless something outside the job differs (the ray compatibility folder on
// PYTHONPATH, which depends on the job's folder); the supervisor's spare.misfit decides
// for good.
func WarmShape(job *v1.TrainJob, workers int) string {
	s := &job.Spec
	py, _ := parsePython(append(slices.Clone(s.Command), s.Args...))
	vars := map[string]string{}
	for _, e := range s.Env {
		if importTime(e.Name) && !gpuChoice(e.Name) {
			vars[e.Name] = e.Value
		}
	}
	var python string
	if len(s.Command) > 0 {
		python = s.Command[0]
	}
	b, _ := json.Marshal(struct {
		Python  string            `json:"python"`
		Flags   []string          `json:"flags"`
		Workers int               `json:"workers"`
		Procs   int               `json:"procs"`
		Env     map[string]string `json:"env"`
	}{python, py.flags, workers, s.ProcCount(), vars})
	return string(b)
}

// Standby starts a pooled spare for every process of the job's first attempt, for a
// job of the same shape that comes next. It returns how many it started.
func (l *Launcher) Standby(ctx context.Context) (int, error) {
	return l.startSpares(ctx, true)
}

// Warm starts a spare for every process of the launcher's next attempt while none runs
// (a Kubernetes worker whose gang has not started it yet: its peers are not all there, or
// it waits to join a running gang), so that its ranks find torch imported. It starts none
// when the launcher holds spares already, and returns how many it started.
func (l *Launcher) Warm(ctx context.Context) (int, error) {
	if l.spares.count() > 0 {
		return 0, nil
	}
	return l.startSpares(ctx, false)
}

// startSpares starts a spare for every process of the job's first attempt: pooled, for a
// standby, which may run a rank on other GPUs and outlives no parent check; or the
// launcher's own.
func (l *Launcher) startSpares(ctx context.Context, pooled bool) (int, error) {
	if err := l.prepare(ctx); err != nil {
		return 0, err
	}
	py, ok := l.pythonRun()
	if !ok {
		return 0, errors.New("the job's command does not run a Python script or module (or turns spares off): nothing to keep warm")
	}
	env := maps.Clone(l.ExtraEnv)
	if env == nil {
		env = map[string]string{}
	}
	if l.rayPath != "" {
		env["PYTHONPATH"] = joinPath(env["PYTHONPATH"], l.rayPath)
	}
	dir, runDir := "", ""
	if !pooled {
		dir = l.Job.Spec.WorkingDir
		if l.Folder != nil {
			runDir = l.Folder.Dir
		}
	}
	for i, p := range l.procs(1, 0) {
		s, err := startSpare(l.path, py, dir, Env(l.Job, p, runDir, os.Environ(), env), p, pooled)
		if err != nil {
			l.spares.drop()
			return 0, err
		}
		l.spares.put(i, s)
	}
	return l.spares.count(), nil
}

// DropSpares kills the launcher's spares: a standby's, or those an attempt stopped by its
// caller left for the next one (KeepSpares), when none will follow.
func (l *Launcher) DropSpares() { l.spares.drop() }

// HandOver prepares the standby's spares for the process it becomes by exec: it writes
// their description to an unlinked file and leaves that file and the spares' pipes open
// across exec. It returns the SparesEnv variable to give that process.
func (l *Launcher) HandOver() (string, error) {
	f, err := os.CreateTemp("", "trainyard-spares-")
	if err != nil {
		return "", fmt.Errorf("hand spares over: %w", err)
	}
	_ = os.Remove(f.Name())
	var list []handedSpare
	l.spares.mu.Lock()
	for i, s := range l.spares.set {
		list = append(list, handedSpare{Index: i, PID: s.os.Pid, Out: int(s.out.Fd()), Handoff: int(s.handoff.Fd()),
			Path: s.path, Flags: s.py.flags, Env: s.env, Proc: s.proc})
	}
	l.spares.mu.Unlock()
	if err := json.NewEncoder(f).Encode(list); err != nil {
		return "", fmt.Errorf("hand spares over: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		return "", fmt.Errorf("hand spares over: %w", err)
	}
	fds := []int{int(f.Fd())}
	for _, h := range list {
		fds = append(fds, h.Out, h.Handoff)
	}
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return "", fmt.Errorf("hand spares over: keep descriptor %d open: %w", fd, err)
		}
	}
	return SparesEnv + "=" + strconv.Itoa(fds[0]), nil
}

// TakeSpares adopts the spares of the standby this process was, if it was one (SparesEnv
// is set; it is unset then, so that no child inherits it), and nil otherwise.
func TakeSpares() (*Spares, error) {
	v, ok := os.LookupEnv(SparesEnv)
	if !ok {
		return nil, nil
	}
	_ = os.Unsetenv(SparesEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q: not a descriptor", SparesEnv, v)
	}
	f := os.NewFile(uintptr(fd), "spares")
	defer f.Close()
	var list []handedSpare
	if err := json.NewDecoder(f).Decode(&list); err != nil {
		return nil, fmt.Errorf("read the standby's spares: %w", err)
	}
	out := &Spares{set: map[int]*spare{}}
	for _, h := range list {
		unix.CloseOnExec(h.Out)
		unix.CloseOnExec(h.Handoff)
		child, _ := os.FindProcess(h.PID) // never fails on Unix
		out.set[h.Index] = &spare{proc: h.Proc, path: h.Path, py: pythonRun{flags: h.Flags}, env: h.Env, os: child,
			out: os.NewFile(uintptr(h.Out), "spare output"), handoff: os.NewFile(uintptr(h.Handoff), "spare handoff"), pooled: true}
	}
	return out, nil
}

// adopt keeps the spares taken from a standby for the first attempt.
func (l *Launcher) adopt() {
	if l.Adopted == nil {
		return
	}
	for i, s := range l.Adopted.set {
		l.spares.put(i, s)
	}
	l.Adopted = nil
}

// StandbyRequest is what a job server writes to a standby's stdin to make it the
// supervisor of a job: the command it execs (Path, Args), with Env, in Dir, its output
// appended to Log.
type StandbyRequest struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	Log  string   `json:"log"`
}

// runDir is the run folder's path, or "" for a standby, which has none.
func (l *Launcher) runDir() string {
	if l.Folder == nil {
		return ""
	}
	return l.Folder.Dir
}
