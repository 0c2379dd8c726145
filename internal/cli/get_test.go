package cli

import (
	"math"
	"testing"
	"time"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/shell"
)

// restartedDetail is a job whose first attempt failed and whose second succeeded, with
// metrics and checkpoints.
func restartedDetail() client.JobDetail {
	exit0, exit1 := 0, 1
	rank := func(r, worker, local, pid int, gpus string, ended *time.Time, code *int, signal string, stopped bool) client.Rank {
		return client.Rank{Rank: r, Worker: worker, LocalRank: local, PID: pid, GPUs: gpus, Started: now.Add(-3 * time.Hour),
			Ended: ended, ExitCode: code, Signal: signal, StoppedByTrainyard: stopped}
	}
	first := client.Attempt{Number: 1, MasterAddr: "127.0.0.1", MasterPort: 29500, Started: now.Add(-3 * time.Hour),
		Ended: at(-170 * time.Minute), Outcome: "failed", Reason: "rank 3 exited 1",
		Ranks: []client.Rank{
			rank(0, 0, 0, 4100, "0", at(-170*time.Minute), nil, "SIGTERM", true),
			rank(1, 0, 1, 4101, "1", at(-170*time.Minute), nil, "SIGTERM", true),
			rank(2, 1, 0, 4102, "2", at(-170*time.Minute), nil, "SIGKILL", true),
			rank(3, 1, 1, 4103, "3", at(-170*time.Minute), &exit1, "", false),
		}}
	second := client.Attempt{Number: 2, MasterAddr: "127.0.0.1", MasterPort: 29731, Started: now.Add(-169 * time.Minute),
		Ended: at(-137 * time.Minute), Outcome: "succeeded", Reason: "succeeded",
		Ranks: []client.Rank{
			rank(0, 0, 0, 4200, "0", at(-137*time.Minute), &exit0, "", false),
			rank(1, 0, 1, 4201, "1", at(-137*time.Minute), &exit0, "", false),
			rank(2, 1, 0, 4202, "2", at(-137*time.Minute), &exit0, "", false),
			rank(3, 1, 1, 0, "3", nil, nil, "", false),
		}}
	second.Ranks[3].Error = "start: fork/exec python3: resource temporarily unavailable"
	return client.JobDetail{
		Job:  succeededJob(),
		Spec: trainJobSpec(2, 2, 2, "python3", "train.py", "--lr", "0.01", "--name", "it's mine"),
		Run: &client.Run{Phase: "Succeeded", Reason: "all 4 ranks exited 0 in attempt 2", Created: now.Add(-3 * time.Hour),
			Updated: now.Add(-137 * time.Minute), Attempts: []client.Attempt{first, second}},
		Results: &client.Result{Iteration: 10, Timestamp: now.Add(-138 * time.Minute), Attempt: 2, Checkpoint: "checkpoint_000009",
			Metrics: client.Metrics{"loss": 0.2318734, "accuracy": 0.9125, "lr": 1e-5, "grad_norm": math.NaN()}},
		Checkpoints: []string{"checkpoint_000008", "checkpoint_000009"},
	}
}

func TestPrintJobDetail(t *testing.T) {
	pendingSpec := trainJobSpec(1, 1, 0, "sh", "-c", "echo hello")
	pendingSpec.Spec.MaxRestarts = 0
	running := runningJob()
	cases := map[string]client.JobDetail{
		"get-restarted": restartedDetail(),
		"get-pending":   {Job: pendingJob(), Spec: pendingSpec},
		"get-preempted": {Job: preemptedJob(), Spec: trainJobSpec(1, 4, 4, "torchrun", "--nproc-per-node=4", "sweep.py")},
		"get-preempting": {Job: preemptingJob(), Spec: trainJobSpec(1, 4, 4, "torchrun", "--nproc-per-node=4", "sweep.py"),
			Run: &client.Run{Phase: "Running", Attempts: []client.Attempt{{Number: 1, MasterAddr: "127.0.0.1",
				MasterPort: 29500, Started: *preemptingJob().StartedAt, Ranks: []client.Rank{
					{Rank: 0, PID: 5200, GPUs: "0,1,2,3", Started: *preemptingJob().StartedAt},
				}}}}},
		"get-running": {Job: running, Spec: trainJobSpec(1, 4, 4, "torchrun", "--nproc-per-node=4", "train.py"),
			Run: &client.Run{Phase: "Running", Attempts: []client.Attempt{{Number: 1, MasterAddr: "127.0.0.1",
				MasterPort: 29500, Started: *running.StartedAt, Ranks: []client.Rank{
					{Rank: 0, PID: 5100, GPUs: "4,5,6,7", Started: *running.StartedAt},
				}}}}},
	}
	for name, d := range cases {
		t.Run(name, func(t *testing.T) {
			v, out := testView(false)
			if err := printJobDetail(v, d); err != nil {
				t.Fatal(err)
			}
			golden(t, name, out.String())
		})
	}
}

func TestShellJoin(t *testing.T) {
	cases := map[string]struct {
		words []string
		want  string
	}{
		"plain words":     {words: []string{"python3", "train.py", "--lr=0.1"}, want: "python3 train.py --lr=0.1"},
		"spaces quoted":   {words: []string{"sh", "-c", "echo hi"}, want: "sh -c 'echo hi'"},
		"a quote escaped": {words: []string{"echo", "it's"}, want: `echo 'it'\''s'`},
		"empty argument":  {words: []string{"cmd", ""}, want: "cmd ''"},
	}
	for name, tc := range cases {
		if got := shell.Join(tc.words); got != tc.want {
			t.Errorf("%s: shell.Join(%q) = %s, want %s", name, tc.words, got, tc.want)
		}
	}
}
