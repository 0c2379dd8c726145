package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/testgit"
)

// trainPy prints the code's VERSION file and fails attempt 1 when FAIL_FIRST is set.
const trainPy = `import os, sys
here = os.path.dirname(os.path.abspath(__file__))
version = open(os.path.join(here, "VERSION")).read().strip()
print("code", version, "rank", os.environ["RANK"], "attempt", os.environ["TRAINYARD_ATTEMPT"], "cwd", os.getcwd(), flush=True)
if os.environ.get("FAIL_FIRST") and os.environ["TRAINYARD_ATTEMPT"] == "1":
    sys.exit(3)
`

// Arena's --sync-mode git on this machine: a private repository served over HTTP is cloned
// once into the run folder, the workers start there, and a run continued after the branch
// moved on keeps the commit it cloned.
func TestRunClonesItsCode(t *testing.T) {
	repo := testgit.New(t, "mnist-pytorch", map[string]string{"train.py": trainPy, "VERSION": "v1\n"})
	first := strings.Fields(repo.Commit("main", "same", nil))[0]
	url := repo.Serve("127.0.0.1:0", "alice", "s3cret")
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	creds := []string{"GIT_SYNC_USERNAME=alice", "GIT_SYNC_PASSWORD=s3cret", "FAIL_FIRST=1"}
	args := []string{"run", "--workers", "2", "--storage-path", runs, "--name", "arena",
		"--sync-mode", "git", "--sync-source", url, "--", "python3", "code/mnist-pytorch/train.py"}

	code, out := run(t, dir, creds, args...)
	// Either rank may be the one that prints: the first to fail stops the other.
	cwd := " attempt 1 cwd " + filepath.Join(runs, "arena")
	if code == 0 || !strings.Contains(out, "code v1 rank 0"+cwd) && !strings.Contains(out, "code v1 rank 1"+cwd) {
		t.Fatalf("first run: exit %d, want a failure after printing code v1 from the run folder:\n%s", code, out)
	}
	if !strings.Contains(out, "trainyard: code from "+url+" at commit "+first[:12]) {
		t.Errorf("the run does not say which commit it cloned:\n%s", out)
	}

	repo.Commit("main", "second", map[string]string{"VERSION": "v2\n"})
	code, out = run(t, dir, creds, args...)
	if code != 0 || !strings.Contains(out, "code v1 rank 1 attempt 2") {
		t.Fatalf("continued run: exit %d, want attempt 2 to run the commit cloned first (v1):\n%s", code, out)
	}
	if rec := readRecord(t, filepath.Join(runs, "arena")); rec.SourceCommit != first {
		t.Errorf("run.json sourceCommit = %q, want %s", rec.SourceCommit, first)
	}
	spec, _ := os.ReadFile(filepath.Join(runs, "arena", "job.yaml"))
	if strings.Contains(string(spec), "s3cret") || !strings.Contains(string(spec), "revision: "+first) {
		t.Errorf("job.yaml should pin the commit and hold no password:\n%s", spec)
	}
	// Started over, the run clones the branch's tip anew; the old folder keeps its clone.
	code, out = run(t, dir, creds[:2], append([]string{"run", "--fresh"}, args[1:]...)...)
	if code != 0 || !strings.Contains(out, "code v2 rank 0 attempt 1") || !strings.Contains(out, "starting run arena over") {
		t.Fatalf("run --fresh: exit %d, want attempt 1 to run the branch's new tip (v2):\n%s", code, out)
	}
	if old, _ := filepath.Glob(filepath.Join(runs, "arena.*", "code", "mnist-pytorch", "VERSION")); len(old) != 1 {
		t.Errorf("the old folder's clone: %v, want it kept", old)
	}

	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown branch", creds, []string{"--sync-source", url, "--sync-branch", "nope"}, `has no branch "nope"; its branches: main`},
		{"no credentials", nil, []string{"--sync-source", url}, "needs credentials: set GIT_SYNC_USERNAME and GIT_SYNC_PASSWORD"},
		{"wrong password", []string{"GIT_SYNC_USERNAME=alice", "GIT_SYNC_PASSWORD=x"}, []string{"--sync-source", url}, "refused the credentials"},
		{"ssh URL", nil, []string{"--sync-source", "git@example.com:o/r.git"}, "not a URL; give https://host/owner/repo.git"},
		{"rsync", nil, []string{"--sync-mode", "rsync", "--sync-source", url}, "Trainyard fetches code with git only"},
		{"branch alone", nil, []string{"--sync-branch", "main"}, "--sync-branch and --sync-rev need --sync-source URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--storage-path", runs, "--name", "bad"}, c.args...)
			code, out := run(t, dir, c.env, append(args, "--", "python3", "code/mnist-pytorch/train.py")...)
			if code != 2 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, want 2 and %q:\n%s", code, c.want, out)
			}
			if _, err := os.Stat(filepath.Join(runs, "bad")); err == nil {
				t.Error("a refused run left a run folder")
			}
		})
	}

	// A script given from where the user is, not from the run folder the workers start
	// in, is refused before anything is made, naming the path that would work.
	code, out = run(t, dir, creds[:2], "run", "--storage-path", runs, "--name", "bad", "--sync-source", url, "--",
		"python3", "train.py")
	want := "script train.py (run by python3) is not in the run folder " + filepath.Join(runs, "bad") +
		", where the workers start; with --sync-source the code is at code/mnist-pytorch/train.py"
	if code != 2 || !strings.Contains(out, want) {
		t.Errorf("a script outside the clone: exit %d, want 2 and %q:\n%s", code, want, out)
	}
	if _, err := os.Stat(filepath.Join(runs, "bad")); err == nil {
		t.Error("a refused run left a run folder")
	}
	// A script the clone lacks is found out once it is cloned: the run ends Failed, saying
	// why, not Pending.
	code, out = run(t, dir, creds[:2], "run", "--storage-path", runs, "--name", "lacks", "--sync-source", url, "--",
		"python3", "code/mnist-pytorch/nope.py")
	rec := readRecord(t, filepath.Join(runs, "lacks"))
	if code != 1 || rec.Phase != v1.PhaseFailed || !strings.Contains(rec.Reason, "before its first attempt: script code/mnist-pytorch/nope.py") {
		t.Errorf("a script the clone lacks: exit %d, run.json %s %q; want 1, Failed with the reason:\n%s", code, rec.Phase, rec.Reason, out)
	}
}

// On the job server the branch is resolved when the job is submitted, with the credentials
// in the job's env as Arena passes them (--env GIT_SYNC_USERNAME=...), and get shows the commit.
func TestServerClonesItsCode(t *testing.T) {
	repo := testgit.New(t, "mnist-pytorch", map[string]string{"train.py": trainPy, "VERSION": "v1\n"})
	tip := repo.Commit("main", "same", nil)
	url := repo.Serve("127.0.0.1:0", "alice", "s3cret")
	s := newJobServer(t, t.TempDir())
	defer s.stopJobs(t)

	code, out := s.cli(t, "submit", "--sync-branch", "nope", "--sync-source", url, "-e", "GIT_SYNC_USERNAME=alice",
		"-e", "GIT_SYNC_PASSWORD=s3cret", "--", "python3", "code/mnist-pytorch/train.py")
	if code != 2 || !strings.Contains(out, `has no branch "nope"; its branches: main`) {
		t.Errorf("unknown branch: exit %d, want 2 and the branches:\n%s", code, out)
	}
	code, out = s.cli(t, "submit", "--name", "arena", "--workers", "2", "--sync-source", url, "-e", "GIT_SYNC_USERNAME=alice",
		"-e", "GIT_SYNC_PASSWORD=s3cret", "--", "python3", "code/mnist-pytorch/train.py")
	if code != 0 || !strings.Contains(out, "code v1 rank 1 attempt 1") {
		t.Fatalf("submit: exit %d, want the job to run the cloned code:\n%s", code, out)
	}
	s.waitStatus(t, "arena", 30*time.Second, "SUCCEEDED")
	code, out = s.cli(t, "get", "arena")
	if code != 0 || !strings.Contains(out, "Code:") || !strings.Contains(out, url+" at commit "+tip) {
		t.Errorf("get: exit %d, want the commit the job ran:\n%s", code, out)
	}
}
