package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/rundir"
	"github.com/trainyard/trainyard/internal/testminio"
)

// bucketRun is trainyard run of the Fashion-MNIST example for epochs, kept in the bucket.
func bucketRun(t *testing.T, storage, name string, epochs string, flags ...string) []string {
	script := filepath.Join(repoRoot(t), "examples", "fashion-mnist", "train.py")
	args := append([]string{"run", "--storage-path", storage, "--name", name, "--workers", "2"}, flags...)
	return append(args, "--", python, script, "--epochs", epochs, "--train-subset", "6000", "--test-subset", "2000")
}

// A run kept in a bucket, as a user with S3 has it: trained on one machine, its
// checkpoints uploaded as it goes and kept by the retention policy in the bucket; then
// continued on another machine with nothing of it on disk, from the bucket's latest
// checkpoint, its attempts and iterations counting on.
func TestRunKeptInABucket(t *testing.T) {
	needTorch(t)
	srv := testminio.Start(t)
	srv.MakeBucket(t, "runs")
	machines := t.TempDir()
	machine := func(name string) []string {
		return append(srv.Env(), "TRAINYARD_STAGING_DIR="+filepath.Join(machines, name))
	}
	code, out := run(t, repoRoot(t), machine("a"), bucketRun(t, "s3://runs/exp", "fm", "2", "--keep-checkpoints", "2")...)
	if code != 0 || !strings.Contains(out, "trainyard: run uploaded to s3://runs/exp/fm") {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	keys := srv.Keys(t, "runs", "exp/fm/")
	for _, want := range []string{"exp/fm/checkpoint_000002/.trainyard-manifest.json", "exp/fm/run.json", "exp/fm/result.json",
		"exp/fm/progress.csv", "exp/fm/logs/attempt-1/rank-1.log", "exp/fm/console.log"} {
		if !slices.Contains(keys, want) {
			t.Errorf("the bucket lacks %s; it has %v", want, keys)
		}
	}

	code, out = run(t, repoRoot(t), machine("b"), bucketRun(t, "s3://runs/exp", "fm", "4", "--keep-checkpoints", "2", "--resume")...)
	if code != 0 {
		t.Fatalf("continued on another machine: exit %d\n%s", code, out)
	}
	for _, s := range []string{"downloaded checkpoint_000002 of run fm from s3://runs/exp/fm",
		"attempt 2: resuming from checkpoint_000002", "resuming from checkpoint_000002: epoch 2 done, continuing at 3", "epoch 4/4"} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q:\n%s", s, out)
		}
	}
	if got := manifests(srv.Keys(t, "runs", "exp/fm/")); !slices.Equal(got, []string{"checkpoint_000003", "checkpoint_000004"}) {
		t.Errorf("committed in the bucket: %v; want the last 2 (--keep-checkpoints 2)", got)
	}
	// Its results and logs, from the machine that ran it and from one that never did.
	for _, m := range []string{"b", "c"} {
		code, out = run(t, repoRoot(t), machine(m), "results", "fm", "--storage-path", "s3://runs/exp")
		if code != 0 || !strings.Contains(out, "checkpoint_000004") {
			t.Errorf("machine %s: results of the run by its bucket: exit %d\n%s", m, code, out)
		}
		code, out = run(t, repoRoot(t), machine(m), "logs", "fm", "--storage-path", "s3://runs/exp")
		if code != 0 || !strings.Contains(out, "epoch 4/4") {
			t.Errorf("machine %s: logs of the run by its bucket: exit %d\n%s", m, code, out)
		}
	}
	var rec rundir.Record
	if err := json.Unmarshal([]byte(srv.Object(t, "runs", "exp/fm/run.json")), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Phase != v1.PhaseSucceeded || len(rec.Attempts) != 2 {
		t.Errorf("the bucket's run.json: phase %s, %d attempts; want Succeeded after 2", rec.Phase, len(rec.Attempts))
	}
}

// What a user gets wrong about a bucket is said before anything starts (exit 2), and
// nothing is made on disk.
func TestBucketRefusedAtOnce(t *testing.T) {
	srv := testminio.Start(t)
	srv.MakeBucket(t, "runs")
	staging := filepath.Join(t.TempDir(), "staging")
	env := append(srv.Env(), "TRAINYARD_STAGING_DIR="+staging)
	for name, tc := range map[string]struct {
		storage string
		env     []string
		want    string
	}{
		"no such bucket": {"s3://no-such-bucket/exp", nil, "the bucket no-such-bucket does not exist (create it first)"},
		"a wrong secret": {"s3://runs/exp", []string{"AWS_SECRET_ACCESS_KEY=not-the-secret"},
			"access denied with the credentials found (AWS_ACCESS_KEY_ID from the environment)"},
		"gs://":   {"gs://runs/exp", nil, "gs:// is not supported yet; use Cloud Storage's S3-compatible API instead"},
		"hdfs://": {"hdfs://nn/exp", nil, "the scheme hdfs:// is not supported: give s3://bucket/prefix or a folder"},
		// Another user's folder as the staging folder: nothing is downloaded into it.
		"an untrusted staging folder": {"s3://runs/exp", []string{"TRAINYARD_STAGING_DIR=" + othersFolder(t)},
			"the staging folder of s3://runs/exp/x (TRAINYARD_STAGING_DIR): "},
	} {
		t.Run(name, func(t *testing.T) {
			code, out := run(t, t.TempDir(), append(slices.Clone(env), tc.env...),
				"run", "--storage-path", tc.storage, "--name", "x", "--", python, "-c", "print('started')")
			if code != 2 || !strings.Contains(out, tc.want) || strings.Contains(out, "started") {
				t.Fatalf("exit %d; want 2 and %q:\n%s", code, tc.want, out)
			}
			if name == "an untrusted staging folder" && !strings.Contains(out, "belongs to uid 12345, not to root (storage path not trusted)") {
				t.Fatalf("the refusal does not name the folder's owner:\n%s", out)
			}
			if strings.Contains(out, "not-the-secret") {
				t.Fatalf("the secret is in the output:\n%s", out)
			}
			if _, err := os.Stat(staging); err == nil {
				t.Fatalf("%s was made", staging)
			}
		})
	}
}

// othersFolder is a folder that another user (uid 12345) owns and anyone may write.
func othersFolder(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 12345, 12345); err != nil {
		t.Skipf("chown to another user: %v (the test needs root)", err)
	}
	return dir
}

func manifests(keys []string) []string {
	var out []string
	for _, k := range keys {
		if dir, ok := strings.CutSuffix(k, "/.trainyard-manifest.json"); ok {
			out = append(out, filepath.Base(dir))
		}
	}
	return out
}

// A Ray Train script whose RunConfig keeps runs in s3:// (no run name, a failure restarted
// by FailureConfig), submitted as a Ray user does: through the Ray Jobs API with the
// server's default submission ID and a `cd dir && python` entrypoint. The gang's run is
// kept in the bucket, report() (SYNC) returns once the bucket has each checkpoint, and
// fit() returns the latest.
func TestRayStoragePathInABucket(t *testing.T) {
	needPlainTorch(t)
	srv := testminio.Start(t)
	srv.MakeBucket(t, "ray")
	dir := t.TempDir()
	t.Setenv("TRAINYARD_STAGING_DIR", filepath.Join(dir, "staging"))
	s := newJobServer(t, dir)
	s.restartWith(t, s.env, append(srv.Env(), "PYTHONPATH=", "PYTHONUSERBASE="+t.TempDir())...)
	defer s.stopJobs(t)
	project := filepath.Join(repoRoot(t), "test", "e2e", "testdata")
	id := s.raySubmitDefault(t, fmt.Sprintf("cd %s && %s ray_s3.py", project, python))
	j := s.waitRay(t, id, 300*time.Second, func(j rayJob) bool { return j.Status != "RUNNING" && j.Status != "PENDING" })
	out := s.rayLogs(t, id)
	if j.Status != "SUCCEEDED" {
		t.Fatalf("%s: %+v; log:\n%s", id, j, out)
	}
	// Attempt 1 commits epoch 0's checkpoint only (rank 1 never reports epoch 1), attempt 2
	// resumes from it and commits epochs 1 and 2 (with the next indices: rank 0's report of
	// epoch 1 in attempt 1 may have taken one).
	keys := srv.Keys(t, "ray", "exp/")
	got := manifests(keys)
	if len(got) != 3 || got[0] != "checkpoint_000001" {
		t.Fatalf("committed in the bucket: %v; want checkpoint_000001 and two of attempt 2 (all keys: %v)", got, keys)
	}
	latest := strings.TrimLeft(strings.TrimPrefix(got[2], "checkpoint_"), "0")
	for _, s := range []string{"WORKER rank=1 start=1", "RESULT checkpoint=" + got[2] + " epoch=2",
		// report() returned only once the bucket had the checkpoint (SYNC, Ray's default).
		"SYNC rank=0 epoch=2 uploaded=" + latest, "SYNC rank=1 epoch=2 uploaded=" + latest} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q:\n%s", s, out)
		}
	}
	if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, "-train/run.json") }) {
		t.Errorf("the gang's run.json is not in the bucket: %v", keys)
	}
}

// A job server whose storage path is a bucket, and a job that brings its own credentials
// (the server has none): the run is kept in the bucket, and the secret is in no answer.
func TestServerJobInABucket(t *testing.T) {
	srv := testminio.Start(t)
	srv.MakeBucket(t, "srv")
	dir := t.TempDir()
	t.Setenv("TRAINYARD_STAGING_DIR", filepath.Join(dir, "staging"))
	s := newJobServer(t, dir, "--storage-path", "s3://srv/runs")
	defer s.stopJobs(t)
	script := filepath.Join(repoRoot(t), "test", "e2e", "testdata", "report.py")
	var flags []string
	for _, kv := range srv.Env() {
		flags = append(flags, "--env", kv)
	}
	code, out := s.cli(t, "submit", append(append([]string{"--name", "in-bucket", "--workers", "2"}, flags...), "--", python, script, "--shards")...)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s\nserver:\n%s", code, out, s.out)
	}
	keys := srv.Keys(t, "srv", "runs/")
	if got := manifests(keys); len(got) != 3 {
		t.Errorf("committed in the bucket: %v, want 3 (all keys: %v)", got, keys)
	}
	if _, out := s.cli(t, "get", "in-bucket"); !strings.Contains(out, "Kept in:      s3://srv/runs/") {
		t.Errorf("get does not say where the run is kept:\n%s", out)
	}
	for _, args := range [][]string{{"get", "in-bucket", "-o", "yaml"}, {"get", "in-bucket"}, {"logs", "in-bucket"}} {
		_, out := s.cli(t, args[0], args[1:]...)
		if strings.Contains(out, testminio.SecretKey) {
			t.Errorf("%v shows the secret:\n%s", args, out)
		}
	}
}

// SIGTERM to a run kept in a bucket: the ranks save at the notice, and the gang is stopped
// once that checkpoint is in the bucket (not merely on this machine's disk), which says
// so; the run then continues on another machine from it.
func TestPreemptedRunInABucket(t *testing.T) {
	needTorch(t)
	srv := testminio.Start(t)
	srv.MakeBucket(t, "runs")
	staging := filepath.Join(t.TempDir(), "a")
	env := append(srv.Env(), "TRAINYARD_STAGING_DIR="+staging)
	args := fourEpochs(t, "s3://runs/exp", "preempted", "--max-restarts", "2")
	ty := start(t, repoRoot(t), env, args...)
	waitForFile(t, filepath.Join(staging, "s3", "runs", "exp", "preempted", "checkpoint_000001"), 5*time.Minute, ty.out)
	time.Sleep(time.Second) // into epoch 2
	if err := ty.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := ty.wait(t); code != 130 {
		t.Fatalf("exit %d after SIGTERM, want 130:\n%s", code, ty.out)
	}
	out := ty.out.String()
	if !strings.Contains(out, "checkpoint_000002 committed and uploaded to s3://runs/exp/preempted after the preemption notice") {
		t.Errorf("the output does not say the checkpoint was uploaded before the stop:\n%s", out)
	}
	if got := manifests(srv.Keys(t, "runs", "exp/preempted/")); !slices.Contains(got, "checkpoint_000002") {
		t.Fatalf("the bucket has %v, not the checkpoint saved at the notice", got)
	}
	env = append(srv.Env(), "TRAINYARD_STAGING_DIR="+filepath.Join(t.TempDir(), "b"))
	code, out := run(t, repoRoot(t), env, args...)
	if code != 0 || !strings.Contains(out, "downloaded checkpoint_000002 of run preempted") || !strings.Contains(out, "epoch 4/4") {
		t.Fatalf("continued on another machine: exit %d\n%s", code, out)
	}
}
