package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// An elastic gang with real DDP (--workers 2:3): the worker of rank 2 dies in every
// attempt of 3; the first failure uses the one restart, the second drops the worker
// without using one, and the gang of 2 resumes from the latest checkpoint and finishes,
// its ranks told the world size changed.
func TestElasticGang(t *testing.T) {
	needTorch(t)
	storage := t.TempDir()
	code, out := run(t, repoRoot(t), nil, "run", "--storage-path", storage, "--name", "elastic", "--workers", "2:3",
		"--max-restarts", "1", "--", python, filepath.Join(repoRoot(t), "test", "e2e", "testdata", "elastic.py"))
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{
		"restarting the gang (restart 1 of 1)",
		"resized from 3 to 2 workers: worker 2 failed 2 attempts in a row; the gang goes on from its latest checkpoint (no restart used)",
		"rank 0 world 2 previous 3 elastic 2:3 attempt 3 from step",
		"rank 1 done in a world of 2",
		"all 2 ranks exited 0 in attempt 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "attempt 3 from step 0") {
		t.Errorf("attempt 3 did not resume from a checkpoint:\n%s", out)
	}
}
