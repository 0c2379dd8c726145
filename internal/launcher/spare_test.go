package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/device"
)

func TestParsePython(t *testing.T) {
	cases := map[string]struct {
		args []string
		want pythonRun
		ok   bool
	}{
		"a script":          {args: []string{"python3", "train.py", "--epochs", "2"}, ok: true, want: pythonRun{flags: []string{}, argv: []string{"train.py", "--epochs", "2"}}},
		"flags":             {args: []string{"/usr/bin/python3.11", "-u", "-X", "dev", "-Wignore", "t.py"}, ok: true, want: pythonRun{flags: []string{"-u", "-X", "dev", "-Wignore"}, argv: []string{"t.py"}}},
		"a module":          {args: []string{"python", "-u", "-m", "pkg.train", "--lr", "1"}, ok: true, want: pythonRun{flags: []string{"-u"}, module: "pkg.train", argv: []string{"pkg.train", "--lr", "1"}}},
		"code":              {args: []string{"python3", "-c", "print(1)"}},
		"stdin":             {args: []string{"python3", "-"}},
		"an unknown flag":   {args: []string{"python3", "-I", "t.py"}},
		"no script":         {args: []string{"python3", "-u"}},
		"not python":        {args: []string{"bash", "t.sh"}},
		"a python-ish name": {args: []string{"pythonista", "t.py"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := parsePython(tc.args)
			if ok != tc.ok {
				t.Fatalf("parsePython(%q) ok %v, want %v", tc.args, ok, tc.ok)
			}
			if ok {
				if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(pythonRun{})); diff != "" {
					t.Errorf("parsePython(%q) (-want +got):\n%s", tc.args, diff)
				}
			}
		})
	}
}

func TestSpareFits(t *testing.T) {
	gpu := []device.GPU{{Index: 1}}
	p := Proc{Attempt: 1, Rank: 1, Worker: 1, LocalRank: 1, MasterPort: 100, GPUs: gpu, WorkerGPUs: gpu}
	py := pythonRun{flags: []string{"-u"}, argv: []string{"train.py"}}
	s := &spare{proc: p, path: "/usr/bin/python3", py: py, env: []string{"OMP_NUM_THREADS=1", "TRAINYARD_ATTEMPT=1", "MASTER_PORT=100", "CUDA_VISIBLE_DEVICES=1"}}
	fits := func(p Proc, env ...string) bool { return s.misfit("/usr/bin/python3", py, p, env) == "" }
	next := p
	next.Attempt, next.MasterPort = 2, 200
	if !fits(next, "OMP_NUM_THREADS=1", "TRAINYARD_ATTEMPT=2", "MASTER_PORT=200", "CUDA_VISIBLE_DEVICES=1") {
		t.Error("the next attempt of the same rank: does not fit")
	}
	if s.misfit("/usr/bin/python3", pythonRun{argv: []string{"other.py"}}, next, []string{"OMP_NUM_THREADS=1", "CUDA_VISIBLE_DEVICES=1"}) == "" {
		t.Error("no -u (a flag Python reads at start): fits")
	}
	if s.misfit("/opt/venv/bin/python3", py, next, []string{"OMP_NUM_THREADS=1", "CUDA_VISIBLE_DEVICES=1"}) == "" {
		t.Error("another Python: fits")
	}
	if s.misfit("/usr/bin/python3", pythonRun{flags: []string{"-u"}, module: "pkg.train", argv: []string{"pkg.train"}}, next,
		[]string{"OMP_NUM_THREADS=1", "CUDA_VISIBLE_DEVICES=1"}) != "" {
		t.Error("another script with the same flags: does not fit (the script is handed over)")
	}
	if fits(next, "OMP_NUM_THREADS=2", "TRAINYARD_ATTEMPT=2", "CUDA_VISIBLE_DEVICES=1") {
		t.Error("another OMP_NUM_THREADS (read when torch loads): fits")
	}
	if fits(next, "OMP_NUM_THREADS=1", "PYTHONPATH=/x", "CUDA_VISIBLE_DEVICES=1") {
		t.Error("another PYTHONPATH: fits")
	}
	other := next
	other.Rank, other.Worker, other.Node, other.Nodes = 0, 0, 0, 2
	if !fits(other, "OMP_NUM_THREADS=1", "CUDA_VISIBLE_DEVICES=1") {
		t.Error("the same process renumbered by a resize (another rank, worker and node): does not fit")
	}
	other = next
	other.LocalRank = 0
	if why := s.misfit("/usr/bin/python3", py, other, []string{"OMP_NUM_THREADS=1", "CUDA_VISIBLE_DEVICES=1"}); why != "local rank: 1 for the spare, 0 for the rank" {
		t.Errorf("another process of the machine: misfit %q, want \"local rank: 1 for the spare, 0 for the rank\"", why)
	}
	other = next
	other.WorkerGPUs, other.GPUs, other.Device = []device.GPU{{Index: 2}}, []device.GPU{{Index: 2}}, 0
	if fits(other, "OMP_NUM_THREADS=1", "CUDA_VISIBLE_DEVICES=2") {
		t.Error("another GPU: fits")
	}
	s.pooled = true // a job server's standby does not know the next job's GPUs
	if !fits(other, "OMP_NUM_THREADS=1", "CUDA_VISIBLE_DEVICES=2") {
		t.Error("a pooled spare on another GPU: does not fit")
	}
	if fits(other, "OMP_NUM_THREADS=4", "CUDA_VISIBLE_DEVICES=2") {
		t.Error("a pooled spare with another OMP_NUM_THREADS: fits")
	}
}

// A restart's ranks run on the spares the launcher started during the first attempt: they
// have torch imported before the script runs (which does not import it), run the script
// as __main__ with its arguments, in its folder, with the new attempt's environment, and
// the run record says so. No spare outlives the run.
// TRAINYARD_TEST_PYTHON names another interpreter (the GPU machine's, test/gpu).
func TestRestartRunsOnSpares(t *testing.T) {
	python := "/usr/bin/python3"
	if v := os.Getenv("TRAINYARD_TEST_PYTHON"); v != "" {
		python = v
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	script := `import os, sys, time
print("attempt", os.environ["TRAINYARD_ATTEMPT"], "torch", "torch" in sys.modules, "name", __name__,
      "argv", sys.argv, "cwd", os.getcwd() == os.environ["WANT_CWD"], "path0", sys.path[0] == os.path.dirname(os.path.abspath(__file__)), flush=True)
with open("/proc/self/cmdline", "rb") as f:
    print("attempt", os.environ["TRAINYARD_ATTEMPT"], "ps", f.read().rstrip(b"\0").decode().split("\0"), flush=True)
if os.environ["TRAINYARD_ATTEMPT"] == "1":
    time.sleep(1)
    sys.exit(3)
`
	job := makeJob(t, "").workers(2).restarts(1).obj(t)
	path := filepath.Join(job.Spec.WorkingDir, "train.py")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	job.Spec.Command, job.Spec.Args = []string{python, "-u", "train.py"}, []string{"--lr", "0.1"}
	job.Spec.Env = append(job.Spec.Env, v1.EnvVar{Name: "WANT_CWD", Value: job.Spec.WorkingDir})
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("%s=%v", PrestartEnv, on), func(t *testing.T) {
			job := job.DeepCopy()
			if !on {
				job.Spec.Env = append(job.Spec.Env, v1.EnvVar{Name: PrestartEnv, Value: "0"})
			}
			job.Spec.RunName = fmt.Sprint("prestart-", on)
			h := newHarness(t, job)
			res, _ := h.run(t, context.Background())
			if res.Outcome != Succeeded {
				t.Fatalf("result %+v; want success\n%s", res, h.out)
			}
			out := h.out.String()
			for _, want := range []string{
				"attempt 1 torch False name __main__ argv ['train.py', '--lr', '0.1'] cwd True path0 True",
				fmt.Sprintf("attempt 2 torch %s name __main__ argv ['train.py', '--lr', '0.1'] cwd True path0 True", map[bool]string{true: "True", false: "False"}[on]),
				// ps shows a rank on a spare as it shows one started afresh.
				fmt.Sprintf("attempt 1 ps ['%s', '-u', 'train.py', '--lr', '0.1']", python),
				fmt.Sprintf("attempt 2 ps ['%s', '-u', 'train.py', '--lr', '0.1']", python),
			} {
				if strings.Count(out, want) != 2 {
					t.Errorf("want %q from both ranks; output:\n%s", want, out)
				}
			}
			rec := h.l.Folder.Record()
			for i, a := range rec.Attempts {
				for _, r := range a.Ranks {
					if r.Prestarted != (on && i == 1) {
						t.Errorf("attempt %d rank %d: prestarted %v", a.Number, r.Rank, r.Prestarted)
					}
				}
			}
			if left := spareChildren(t); len(left) > 0 {
				t.Errorf("spares left after the run: %v", left)
			}
		})
	}
}

// A spare imports nothing from the working folder before the rank's script runs, as a
// rank started afresh does not: a torch.py, json.py or runpy.py that another user planted
// in a world-writable working folder is never run as the job's user.
func TestSpareImportsNothingPlanted(t *testing.T) {
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	job := makeJob(t, "").workers(1).restarts(1).obj(t)
	job.Spec.StoragePath = filepath.Join(t.TempDir(), "results")
	work := job.Spec.WorkingDir
	if err := os.Chmod(work, 0o777); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "planted")
	for _, mod := range []string{"torch", "json", "runpy"} {
		code := fmt.Sprintf("open(%q, 'a').write(%q + '\\n')\n", marker, mod)
		if err := os.WriteFile(filepath.Join(work, mod+".py"), []byte(code), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(t.TempDir(), "train.py") // the job's own script, in a folder of its own
	if err := os.WriteFile(script, []byte(`import os, sys, time
print("attempt", os.environ["TRAINYARD_ATTEMPT"], "spare", "torch" in sys.modules, flush=True)
if os.environ["TRAINYARD_ATTEMPT"] == "1":
    time.sleep(1)  # the spare starts once the rank printed
    sys.exit(3)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	job.Spec.Command = []string{python, script}
	h := newHarness(t, job)
	res, _ := h.run(t, context.Background())
	if res.Outcome != Succeeded || !strings.Contains(h.out.String(), "attempt 2 spare True") {
		t.Fatalf("result %+v; want success, attempt 2 on a spare\n%s", res, h.out)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("modules planted in the working folder ran: %q", b)
	}
}

// A rank on a spare that raises shows its traceback from its script's frame, as a rank
// started afresh does, with no spare's or runpy's frames (<frozen runpy>), and exits 1.
func TestSpareTracebackIsTheScripts(t *testing.T) {
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	job := makeJob(t, "").workers(1).restarts(1).obj(t)
	script := filepath.Join(job.Spec.WorkingDir, "train.py")
	if err := os.WriteFile(script, []byte(`import os, sys, time
print("started", flush=True)  # a rank that printed gets a spare for the next attempt
time.sleep(1)
def fail():
    raise RuntimeError("attempt " + os.environ["TRAINYARD_ATTEMPT"] + " spare " + str("torch" in sys.modules))
fail()
`), 0o644); err != nil {
		t.Fatal(err)
	}
	job.Spec.Command = []string{python, "train.py"}
	h := newHarness(t, job)
	res, _ := h.run(t, context.Background())
	out := h.out.String()
	if res.Outcome != Failed || !strings.Contains(out, "RuntimeError: attempt 2 spare True") {
		t.Fatalf("result %+v; want attempt 2 to fail on a spare\n%s", res, out)
	}
	_, second, _ := strings.Cut(out, "attempt 2:")
	for _, unwanted := range []string{"<frozen runpy>", "runpy.py", `File "<string>"`} {
		if strings.Contains(second, unwanted) {
			t.Errorf("the traceback of the rank on a spare shows %s:\n%s", unwanted, second)
		}
	}
	if !strings.Contains(second, `train.py", line 6, in <module>`) || res.Last.ExitCode != 1 {
		t.Errorf("exit code %d; want the script's frames and exit code 1:\n%s", res.Last.ExitCode, second)
	}
}

// spareChildren lists this process's children that run a spare's code.
func spareChildren(t *testing.T) []string {
	t.Helper()
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !strings.Contains(string(cmd), "the import a spare saves") {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join(d, "stat"))
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 2 && f[1] == strconv.Itoa(os.Getpid()) && f[0] != "Z" {
			out = append(out, filepath.Base(d))
		}
	}
	return out
}

func TestPrestartSetting(t *testing.T) {
	for value, want := range map[string]bool{"0": false, "false": false, "1": true, "TRUE": true, "": true} {
		job := &v1.TrainJob{Spec: v1.TrainJobSpec{Env: []v1.EnvVar{{Name: PrestartEnv, Value: value}}}}
		if got, err := prestartSetting(job); err != nil || got != want {
			t.Errorf("%s=%q: %v, %v; want %v", PrestartEnv, value, got, err, want)
		}
	}
	job := makeJob(t, "exit 0").obj(t)
	job.Spec.Env = append(job.Spec.Env, v1.EnvVar{Name: PrestartEnv, Value: "yes please"})
	err := Preflight(job)
	if err == nil || !strings.Contains(err.Error(), `env TRAINYARD_PRESTART="yes please": want 1`) {
		t.Errorf("Preflight: %v; want the variable refused, saying what it takes", err)
	}
}

// An attempt's spares are kept when a restart may follow at once: it failed on its own, or
// its caller stopped it with a cause that KeepSpares accepts.
func TestRestartFollows(t *testing.T) {
	restart := errors.New("restart")
	keep := func(cause error) bool { return errors.Is(cause, restart) }
	stopped := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	for _, c := range []struct {
		name    string
		ctx     context.Context
		keep    func(error) bool
		outcome Outcome
		want    bool
	}{
		{"failed", context.Background(), nil, Failed, true},
		{"succeeded", context.Background(), keep, Succeeded, false},
		{"interrupted", context.Background(), keep, Interrupted, false},
		{"stopped, no KeepSpares", stopped(restart), nil, Interrupted, false},
		{"stopped for a restart", stopped(restart), keep, Interrupted, true},
		{"stopped otherwise", stopped(nil), keep, Failed, false},
	} {
		l := &Launcher{KeepSpares: c.keep}
		if got := l.restartFollows(c.ctx, AttemptResult{Outcome: c.outcome}); got != c.want {
			t.Errorf("%s: restartFollows %v; want %v", c.name, got, c.want)
		}
	}
}
