package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// standaloneScript imports the helper outside a run: it prints its context and reports.
const standaloneScript = `import trainyard
ctx = trainyard.get_context()
print(f"rank {ctx.rank} of {ctx.world_size}", flush=True)
trainyard.report({"loss": 0.5})
`

// A script that imports trainyard runs outside Trainyard once PYTHONPATH has the folder
// trainyard python-path prints: under plain python3, and under torchrun (2 ranks).
func TestPythonPathOutsideARun(t *testing.T) {
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CACHE_HOME="}
	code, out := run(t, t.TempDir(), env, "python-path")
	dir := strings.TrimSpace(out)
	if code != 0 || !filepath.IsAbs(dir) || !strings.HasPrefix(dir, home) {
		t.Fatalf("python-path: exit %d, %q; want a folder in the cache under %s", code, out, home)
	}
	if _, err := os.Stat(filepath.Join(dir, "trainyard", "__init__.py")); err != nil {
		t.Fatalf("python-path printed %s, without the helper: %v", dir, err)
	}
	script := filepath.Join(t.TempDir(), "train.py")
	writeFile(t, script, standaloneScript)
	pyEnv := append(os.Environ(), "PYTHONPATH="+dir, "HOME="+home)

	cmd := exec.Command(python, script)
	cmd.Env = pyEnv
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "rank 0 of 1") || !strings.Contains(string(got), `trainyard.report: {"loss": 0.5}`) {
		t.Errorf("plain python3: %v\n%s", err, got)
	}
	// As Ray Train's local mode, rank 0's reports are kept, and it says where, once.
	local := filepath.Join(home, "trainyard_results", "local", "train")
	if !strings.Contains(string(got), "rank 0's metrics and checkpoints are kept in "+local) {
		t.Errorf("plain python3 does not say where its reports are kept:\n%s", got)
	}
	if data, err := os.ReadFile(filepath.Join(local, "result.json")); err != nil || !strings.Contains(string(data), `"loss": 0.5`) {
		t.Errorf("%s/result.json: %v, %q", local, err, data)
	}

	torchrun := filepath.Join(filepath.Dir(python), "torchrun")
	if _, err := os.Stat(torchrun); err != nil {
		t.Skipf("no torchrun beside %s", python)
	}
	// Debian's torchrun crashes on Python 3.11 without --redirects and --tee.
	cmd = exec.Command(torchrun, "--standalone", "--nproc_per_node", "2", "--redirects", "9:1", "--tee", "9:1", script)
	cmd.Env = pyEnv
	got, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "rank 0 of 2") || !strings.Contains(string(got), "rank 1 of 2") {
		t.Errorf("torchrun: %v\n%s", err, got)
	}
}
