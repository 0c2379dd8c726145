package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/workload"
)

// The help names every variable the operator sets.
func TestWorkerHelp(t *testing.T) {
	code, out, _ := trainyard("worker", "--help")
	for _, v := range []string{workload.EnvJob, workload.EnvAttempt, workload.EnvWorker, workload.EnvMasterAddr,
		workload.EnvMasterPort, workload.EnvRestarts, workload.EnvDisruptions, workload.EnvGangSecret, workload.EnvGangAddr,
		envTerminationLog, workload.BinPath, strconv.Itoa(workload.GangPort), "Exit codes"} {
		if !strings.Contains(out, v) {
			t.Errorf("worker --help lacks %s:\n%s", v, out)
		}
	}
	if code != 0 {
		t.Errorf("worker --help: exit %d", code)
	}
}

// Bad variables: exit 2, every bad one named, and a summary that says so.
func TestWorkerBadEnvironment(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "termination-log")
	t.Setenv(envTerminationLog, summary)
	for _, v := range []string{workload.EnvJob, workload.EnvAttempt, workload.EnvMasterAddr, workload.EnvMasterPort} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	t.Setenv(workload.EnvWorker, "1")
	t.Setenv(workload.EnvMasterPort, "port")
	code, _, errOut := trainyard("worker")
	if code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
	for _, want := range []string{"trainyard: worker: bad environment", "TRAINYARD_JOB: not set", "TRAINYARD_ATTEMPT: not set",
		"MASTER_ADDR: not set", `MASTER_PORT: must be a whole number from 1 to 65535, got "port"`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := workload.DecodeSummary(string(data))
	if err != nil || sum.Outcome != "failed" || sum.Worker != 1 || !strings.Contains(sum.Reason, "TRAINYARD_JOB: not set") {
		t.Errorf("summary %+v (%v): want a failure of worker 1 naming the variables", sum, err)
	}
	if code, _, errOut := trainyard("worker", "extra"); code != ExitUsage || !strings.Contains(errOut, "unknown command") {
		t.Errorf("worker with an argument: exit %d, %q", code, errOut)
	}
}

func TestCopySelf(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := trainyard("copy-self", dir)
	if code != 0 || out != "trainyard: copied to "+filepath.Join(dir, "trainyard")+"\n" {
		t.Fatalf("copy-self: exit %d, %q, %q", code, out, errOut)
	}
	self, _ := os.Executable()
	want, _ := os.Stat(self)
	got, err := os.Stat(filepath.Join(dir, "trainyard"))
	if err != nil || got.Size() != want.Size() || got.Mode().Perm() != 0o755 {
		t.Errorf("copy: %v, %v; want %d bytes, mode 0755", got, err, want.Size())
	}
	if code, _, _ := trainyard("copy-self", filepath.Join(dir, "missing")); code != ExitFailed {
		t.Errorf("copy-self into a missing folder: exit %d, want 1", code)
	}
}
