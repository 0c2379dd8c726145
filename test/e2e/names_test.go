package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A server job's run folder is named by its ID, yet results finds it by the job's name
// (or ID); logs still prints the server's job by name; a name that is neither a run nor
// a job exits 1.
func TestServerJobByNameInResults(t *testing.T) {
	dir := t.TempDir()
	s := newJobServer(t, dir)
	t.Cleanup(func() {
		s.stopJobs(t)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "report.py")
	code, out := s.cli(t, "submit", "--no-wait", "--name", "s1", "--", python, script, "--iterations", "2")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("submit: exit %d:\n%s", code, out)
	}
	s.waitStatus(t, "s1", 2*time.Minute, "SUCCEEDED")

	storage := filepath.Join(dir, "elsewhere") // no run s1 there
	for _, ref := range []string{"s1", id} {
		code, out := s.cli(t, "results", ref, "--storage-path", storage)
		if code != 0 || !strings.Contains(out, "checkpoint_000002") {
			t.Errorf("results %s: exit %d, want the job's two results:\n%s", ref, code, out)
		}
	}
	if code, out := s.cli(t, "logs", "s1", "--storage-path", storage); code != 0 || !strings.Contains(out, "reported iteration 2") {
		t.Errorf("logs s1: exit %d, want the job's console log:\n%s", code, out)
	}
	if code, out := s.cli(t, "results", "nope", "--storage-path", storage); code != 1 || !strings.Contains(out, "no job with id or name 'nope'") {
		t.Errorf("results nope: exit %d, want 1:\n%s", code, out)
	}
}
