package launcher

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

func TestKeepsWarm(t *testing.T) {
	cases := []struct {
		command []string
		env     []v1.EnvVar
		want    bool
	}{
		{[]string{"python3", "train.py", "--lr", "0.1"}, nil, true},
		{[]string{"/usr/bin/python3", "-u", "-m", "pkg.train"}, nil, true},
		{[]string{"python3", "-c", "print(1)"}, nil, false},
		{[]string{"sleep", "60"}, nil, false},
		{[]string{"bash", "-c", "python3 train.py"}, nil, false},
		{[]string{"python3", "train.py"}, []v1.EnvVar{{Name: PrestartEnv, Value: "0"}}, false},
	}
	for _, c := range cases {
		job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: c.command, Env: c.env}}
		if got := KeepsWarm(job); got != c.want {
			t.Errorf("KeepsWarm(%q, env %v) = %v, want %v", c.command, c.env, got, c.want)
		}
	}
}

// Jobs that differ only in their script, its arguments and their GPUs have one shape;
// another Python, flag, size or variable read at import makes another.
func TestWarmShape(t *testing.T) {
	two := int32(2)
	job := func(command []string, procs int32, env ...v1.EnvVar) *v1.TrainJob {
		return &v1.TrainJob{Spec: v1.TrainJobSpec{Command: command, ProcsPerWorker: &procs, Workers: &two, Env: env}}
	}
	base := WarmShape(job([]string{"python3", "-u", "train.py", "--lr", "0.1"}, 1, v1.EnvVar{Name: "OMP_NUM_THREADS", Value: "2"}), 2)
	same := map[string]*v1.TrainJob{
		"another script and arguments": job([]string{"python3", "-u", "other.py"}, 1, v1.EnvVar{Name: "OMP_NUM_THREADS", Value: "2"}),
		"other GPUs and a variable read later": job([]string{"python3", "-u", "train.py"}, 1, v1.EnvVar{Name: "OMP_NUM_THREADS", Value: "2"},
			v1.EnvVar{Name: "CUDA_VISIBLE_DEVICES", Value: "3"}, v1.EnvVar{Name: "WANDB_PROJECT", Value: "x"}),
	}
	for name, j := range same {
		if got := WarmShape(j, 2); got != base {
			t.Errorf("%s: shape %s, want %s", name, got, base)
		}
	}
	other := map[string]string{
		"another Python":      WarmShape(job([]string{"/opt/py/bin/python3", "-u", "train.py"}, 1, v1.EnvVar{Name: "OMP_NUM_THREADS", Value: "2"}), 2),
		"another flag":        WarmShape(job([]string{"python3", "train.py"}, 1, v1.EnvVar{Name: "OMP_NUM_THREADS", Value: "2"}), 2),
		"fewer workers":       WarmShape(job([]string{"python3", "-u", "train.py"}, 1, v1.EnvVar{Name: "OMP_NUM_THREADS", Value: "2"}), 1),
		"more processes":      WarmShape(job([]string{"python3", "-u", "train.py"}, 2, v1.EnvVar{Name: "OMP_NUM_THREADS", Value: "2"}), 2),
		"another OMP setting": WarmShape(job([]string{"python3", "-u", "train.py"}, 1, v1.EnvVar{Name: "OMP_NUM_THREADS", Value: "4"}), 2),
	}
	for name, got := range other {
		if got == base {
			t.Errorf("%s: the same shape as the first job's, %s", name, got)
		}
	}
}

func TestTakeSpares(t *testing.T) {
	t.Setenv(SparesEnv, "")
	if s, err := TakeSpares(); err == nil || s != nil {
		t.Errorf("TakeSpares with %s empty = %v, %v; want an error", SparesEnv, s, err)
	}
	t.Setenv(SparesEnv, "1") // stdout is no standby's description
	if _, err := TakeSpares(); err == nil {
		t.Error("TakeSpares of fd 1: no error")
	}
	if s, err := TakeSpares(); s != nil || err != nil { // unset by the call before
		t.Errorf("TakeSpares without %s = %v, %v; want nothing", SparesEnv, s, err)
	}
}

// A standby's spare starts without a parent-death signal (the standby's exec would send
// it), and sets SIGKILL once it gets its rank, so that the rank dies with its launcher
// as every other rank does.
func TestPooledSpareDiesWithItsLauncher(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "rank.py")
	code := "import ctypes, os\nv = ctypes.c_int()\nctypes.CDLL(None).prctl(2, ctypes.byref(v))  # PR_GET_PDEATHSIG\n" +
		"print('pdeathsig', v.value, 'parent', os.getppid() == int(os.environ['WANT_PARENT']), flush=True)\n"
	if err := os.WriteFile(script, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	py := pythonRun{argv: []string{script}}
	s, err := startSpare(python, py, dir, os.Environ(), Proc{}, true)
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "WANT_PARENT="+strconv.Itoa(os.Getpid()))
	if err := s.hand(dir, env, py, nil); err != nil {
		s.kill()
		t.Fatal(err)
	}
	out, _ := io.ReadAll(s.out)
	s.out.Close()
	if state, err := s.os.Wait(); err != nil || !state.Success() {
		t.Errorf("the rank: %v %v\n%s", state, err, out)
	}
	if want := "pdeathsig 9 parent True\n"; !strings.HasSuffix(string(out), want) {
		t.Errorf("the rank printed %q, want it to end with %q", out, want)
	}
}
