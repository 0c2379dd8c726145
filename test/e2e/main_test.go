package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/testbinary"
)

var (
	binary string // the trainyard binary under test
	python string // the interpreter with torch
)

func TestMain(m *testing.M) {
	python = os.Getenv("TRAINYARD_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	testbinary.Main(m, &binary)
}

// repoRoot is the repository's top folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// needTorch skips a test when PyTorch is not importable.
func needTorch(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping real PyTorch training")
	}
	if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("PyTorch is not installed for %s (%v): `make test` installs python3-torch", python, err)
	}
	if _, err := os.Stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); err != nil {
		t.Skip("Fashion-MNIST is not installed: `make test` installs dataset-fashion-mnist")
	}
}

// lineBuffer collects a process's output and lets a test wait for a line.
type lineBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the output holds text, or fails the test after timeout.
func (b *lineBuffer) waitFor(t *testing.T, text string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(b.String(), text) {
			return
		}
	}
	t.Fatalf("no %q within %s; output:\n%s", text, timeout, b.String())
}

// trainyard is a started trainyard process.
type trainyard struct {
	cmd *exec.Cmd
	out *lineBuffer
}

// start starts trainyard with args, in dir, with extra environment.
func start(t *testing.T, dir string, env []string, args ...string) *trainyard {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out := &lineBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &trainyard{cmd: cmd, out: out}
}

// wait waits for trainyard to exit and returns its exit code.
func (ty *trainyard) wait(t *testing.T) int {
	t.Helper()
	err := ty.cmd.Wait()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatalf("wait: %v", err)
	}
	return 0
}

// run runs trainyard to the end and returns its exit code and output.
func run(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	ty := start(t, dir, env, args...)
	code := ty.wait(t)
	return code, ty.out.String()
}

// readRecord reads a run's run.json.
func readRecord(t *testing.T, runDir string) rundir.Record {
	t.Helper()
	rec, err := rundir.ReadRecord(runDir)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
