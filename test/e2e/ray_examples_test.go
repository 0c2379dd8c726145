package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rayExamples prepares a home folder whose ~/data holds a small Fashion-MNIST (first 512
// training and 128 test samples) where torchvision looks, with examples/ray-train's own
// prepare_data.py, and returns it with the examples' folder.
func rayExamples(t *testing.T) (home, examples string) {
	t.Helper()
	needTorch(t)
	if err := exec.Command(python, "-c", "import torchvision, tqdm, filelock").Run(); err != nil {
		t.Skipf("torchvision, tqdm or filelock is not installed for %s (%v): `make test` installs them", python, err)
	}
	home = t.TempDir()
	examples = filepath.Join(repoRoot(t), "examples", "ray-train")
	out, err := exec.Command(python, filepath.Join(examples, "prepare_data.py"), "--root", filepath.Join(home, "data"),
		"--train", "512", "--test", "128").CombinedOutput()
	if err != nil {
		t.Fatalf("prepare_data.py: %v\n%s", err, out)
	}
	return home, examples
}

// prepare_data.py without the data set says where it looked and how to get it, and
// writes nothing.
func TestPrepareDataWithoutTheDataSet(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	empty := t.TempDir()
	out, err := exec.Command(python, filepath.Join(repoRoot(t), "examples", "ray-train", "prepare_data.py"),
		"--root", root, "--source", empty).CombinedOutput()
	if err == nil || !strings.Contains(string(out), filepath.Join(empty, "train-images-idx3-ubyte.gz")+" is missing") ||
		!strings.Contains(string(out), "apt-get install dataset-fashion-mnist") {
		t.Errorf("want a failure naming the missing file and the package: %v\n%s", err, out)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("it wrote %s anyway (%v)", root, err)
	}
}

var doublePrefix = regexp.MustCompile(`(?m)^\[ranks? [^\]]*\] \[ranks? `)

// KubeRay's own Ray Train sample, unmodified (it downloads Fashion-MNIST into ~/data and
// finds it there), runs as the driver of `trainyard run`: fit() launches its 4 workers,
// reports 10 epochs, prints Ray's Training result; every line has one rank prefix.
func TestRayKubeRaySampleRunsUnmodified(t *testing.T) {
	home, examples := rayExamples(t)
	storage := t.TempDir()
	code, out := run(t, home, []string{"HOME=" + home, "PYTHONPATH="},
		"run", "--storage-path", storage, "--", python, filepath.Join(examples, "ray_train_pytorch_mnist.py"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// Ray's Result repr: one attribute a line.
	if !regexp.MustCompile(`Training result: Result\(\n.*  metrics=\{'loss': [0-9.]+, 'accuracy': [0-9.]+\},\n`).MatchString(out) {
		t.Errorf("no Training result with the last metrics:\n%s", out)
	}
	for _, want := range []string{"Training started with configuration:", "│ train_loop_config/epochs",
		"Training finished iteration 10 at ", "│ Training result", "│ training_iteration", "Training completed after 10 iterations at "} {
		if !strings.Contains(out, want) {
			t.Errorf("Ray's output lacks %q:\n%s", want, out)
		}
	}
	if rows := regexp.MustCompile(`(?m)^\[rank 0 pid \d+\]\s+10\s+[0-9.]+\s+[0-9.]+`).FindAllString(out, -1); len(rows) != 1 {
		t.Errorf("want the results table's 10th row (10 epochs reported):\n%s", out)
	}
	for rank := range 4 {
		if !regexp.MustCompile(`(?m)^\[rank ` + string(rune('0'+rank)) + ` pid \d+\] (Train|Test) Epoch`).MatchString(out) {
			t.Errorf("no progress line of rank %d with its own prefix", rank)
		}
	}
	if m := doublePrefix.FindString(out); m != "" {
		t.Errorf("a line with two prefixes (%q):\n%s", m, out)
	}
}

// The checkpointing fine-tune in the style of Ray's user guide survives a worker killed
// mid-run: FailureConfig restarts the gang, which resumes from the last checkpoint, and
// fit() returns the final metrics and the best kept checkpoint.
func TestRayFinetuneSurvivesAKilledWorker(t *testing.T) {
	home, examples := rayExamples(t)
	storage := t.TempDir()
	ty := start(t, home, []string{"HOME=" + home, "PYTHONPATH="}, "run", "--", python,
		filepath.Join(examples, "finetune_checkpoints.py"), "--epochs", "5", "--storage-path", storage, "--sleep-per-step", "0.2")
	gang := filepath.Join(storage, "finetune")
	waitForFile(t, filepath.Join(gang, "checkpoint_000001"), 5*time.Minute, ty.out)
	rec := readRecord(t, gang)
	victim := rec.Attempts[0].Ranks[1]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill rank 1 (pid %d): %v", victim.PID, err)
	}
	code := ty.wait(t)
	out := ty.out.String()
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	rec = readRecord(t, gang)
	if len(rec.Attempts) != 2 || rec.Phase != "Succeeded" {
		t.Fatalf("gang: %d attempts, phase %s; want a restart that succeeded:\n%s", len(rec.Attempts), rec.Phase, out)
	}
	if !strings.Contains(out, "resumed from the checkpoint of epoch") {
		t.Errorf("attempt 2 did not resume from a checkpoint:\n%s", out)
	}
	m := regexp.MustCompile(`Final metrics: \{'loss': [0-9.]+, 'epoch': 4\}\S*\s.*Best checkpoint: (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no final metrics of epoch 4 and best checkpoint:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(m[1], "model.pt")); err != nil {
		t.Errorf("the best checkpoint %s: %v", m[1], err)
	}
	if kept := committedCheckpoints(t, gang); len(kept) != 2 {
		t.Errorf("kept checkpoints %v; want 2 (num_to_keep=2)", kept)
	}

	// The same script again with the same RunConfig(name, storage_path) and more epochs
	// continues the finished run from its latest checkpoint, as Ray Train V2 does.
	code, out = run(t, home, []string{"HOME=" + home, "PYTHONPATH="}, "run", "--", python,
		filepath.Join(examples, "finetune_checkpoints.py"), "--epochs", "6", "--storage-path", storage)
	if code != 0 || !strings.Contains(out, "resumed from the checkpoint of epoch 4") || !strings.Contains(out, "'epoch': 5}") {
		t.Errorf("rerun: exit %d; want it resumed from epoch 4 and trained epoch 5:\n%s", code, out)
	}
}

// Ray's quickstart in the style of its guide, unmodified (no main guard, fit() at the top
// level, its model a class of the script), with every worker saving its part of each
// checkpoint: under fit()'s own gang and under `trainyard run --workers 2`, local rank 0
// alone prepares the data while the other waits at a barrier (both ranks are on node 0,
// local ranks 0 and 1 of 2), every checkpoint holds both workers' shards merged, and a
// resumed run gives each worker its own. When fit() starts the gang, the script is Ray's
// driver: its top level runs once (the workers get train_func by value and never run the
// script), so what follows fit() prints once, and best_checkpoints lists the 2 checkpoints
// CheckpointConfig(num_to_keep=2) kept. Under --workers 2 every rank runs the script, as
// torchrun would, so each prints it.
func TestRayQuickstartShardedCheckpoints(t *testing.T) {
	needTorch(t)
	script := filepath.Join(repoRoot(t), "examples", "ray-train", "quickstart_sharded.py")
	cases := map[string]struct {
		args     []string
		run      string // the run folder's name
		topLevel int    // how many processes run the script's top level
		kept     string // best_checkpoints and the run folder's checkpoints, as the script prints them
	}{
		"fit() starts the gang": {run: "quickstart-sharded", topLevel: 1,
			kept: "] best_checkpoints: checkpoint_000002, checkpoint_000003; the run folder holds: checkpoint_000002, checkpoint_000003\n"},
		// Both ranks' copies of a line are counted: the console must not fold them.
		"trainyard run --workers 2": {args: []string{"--workers", "2", "--name", "qs", "--fold-logs=false"}, run: "qs", topLevel: 2,
			kept: "the run folder holds: checkpoint_000001, checkpoint_000002, checkpoint_000003\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			env := []string{"HOME=" + home, "PYTHONPATH="}
			args := append(append([]string{"run"}, tc.args...), "--", python, script)
			code, out := run(t, home, env, args...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			if n := strings.Count(out, "prepared the data set"); n != 1 {
				t.Errorf("the data set was prepared %d times; want once, by local rank 0:\n%s", n, out)
			}
			for _, want := range []string{"] worker 0: local rank 0 of 2 on node 0", "] worker 1: local rank 1 of 2 on node 0",
				"] checkpoint checkpoint_000003 holds: model.pt, worker-0.pt, worker-1.pt",
				"trainyard: checkpoint_000001: several ranks wrote model.pt"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if n := strings.Count(out, "] checkpoint checkpoint_000003 holds: "); n != tc.topLevel {
				t.Errorf("the code after fit() ran %d times, want %d:\n%s", n, tc.topLevel, out)
			}
			if n := strings.Count(out, tc.kept); n != tc.topLevel {
				t.Errorf("%d lines %q, want %d:\n%s", n, tc.kept, tc.topLevel, out)
			}
			if strings.Contains(out, "only rank 0's checkpoint is kept") {
				t.Errorf("a rank's files were dropped:\n%s", out)
			}
			folder := filepath.Join(home, "trainyard_results", tc.run)
			for _, ckpt := range committedCheckpoints(t, folder) {
				for _, f := range []string{"model.pt", "worker-0.pt", "worker-1.pt"} {
					if _, err := os.Stat(filepath.Join(folder, ckpt, f)); err != nil {
						t.Errorf("%s: %v", ckpt, err)
					}
				}
			}
			if tc.run != "qs" {
				return
			}
			// Resumed: each worker finds its own shard in the merged checkpoint.
			code, out = run(t, home, env, append([]string{"run", "--resume"}, args[1:]...)...)
			for rank := range 2 {
				want := fmt.Sprintf("worker %d: resumed from its shard of epoch 2", rank)
				if code != 0 || !strings.Contains(out, want) {
					t.Errorf("resumed run: exit %d, want %q:\n%s", code, want, out)
				}
			}
		})
	}
}
