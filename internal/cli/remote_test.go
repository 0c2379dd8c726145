package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with what the commands print")

// now is the time the tables of the tests are printed at.
var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// at returns a time d after now (before it when d is negative), as a pointer.
func at(d time.Duration) *time.Time {
	t := now.Add(d)
	return &t
}

// testView returns a view that prints into a buffer, at now, in UTC.
func testView(wide bool) (view, *bytes.Buffer) {
	var buf bytes.Buffer
	return view{out: &buf, now: now, loc: time.UTC, wide: wide}, &buf
}

// golden compares got with testdata/<name>.golden, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// Fixtures: the wire values a server answers, fixed.

func succeededJob() client.Job {
	return client.Job{ID: "raysubmit_5dKq1Lr2ZyTtWg8a", Name: "fashion-mnist", Status: client.StatusSucceeded,
		Message: "all 4 ranks exited 0 in attempt 2", Priority: 0, GPUs: [][]int{{0, 1}, {2, 3}},
		RunDir: "/home/ada/trainyard_results/raysubmit_5dKq1Lr2ZyTtWg8a", SubmittedAt: now.Add(-3 * time.Hour),
		StartedAt: at(-3*time.Hour + 2*time.Second), EndedAt: at(-2*time.Hour - 17*time.Minute)}
}

func runningJob() client.Job {
	return client.Job{ID: "bert-large", Name: "bert", Status: client.StatusRunning, Priority: 10,
		GPUs: [][]int{{4, 5, 6, 7}}, RunDir: "/data/runs/bert-large", SubmittedAt: now.Add(-95 * time.Second),
		StartedAt: at(-90 * time.Second)}
}

func pendingJob() client.Job {
	return client.Job{ID: "raysubmit_PzQ8vB3nXe0aLk2m", Status: client.StatusPending, Priority: -1,
		Message:     "waiting for 8 GPUs: 4 of 8 free; the job of priority 10 ahead of it starts first, when bert-large ends",
		SubmittedAt: now.Add(-26 * time.Hour)}
}

func stoppingJob() client.Job {
	return client.Job{ID: "sweep-3", Name: "sweep", Status: client.StatusRunning, StopRequested: true,
		GPUs: [][]int{{}}, SubmittedAt: now.Add(-9 * 24 * time.Hour), StartedAt: at(-9 * 24 * time.Hour)}
}

func trainJobSpec(workers, procs, gpus int32, command ...string) *v1.TrainJob {
	cpu := resource.MustParse("4")
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Workers: &workers, ProcsPerWorker: &procs, Command: command,
		Resources: v1.WorkerResources{GPU: gpus, CPU: &cpu}, WorkingDir: "/home/ada/mnist", MaxRestarts: 3}}
	job.APIVersion, job.Kind = v1.APIVersion, v1.Kind
	return job
}

func TestHumanDuration(t *testing.T) {
	cases := map[time.Duration]string{
		0: "0s", 45 * time.Second: "45s", 119 * time.Second: "119s", 200 * time.Second: "3m20s", 4 * time.Minute: "4m",
		3 * time.Hour: "3h", 48 * time.Hour: "2d",
		25 * time.Minute: "25m", 5*time.Hour + 12*time.Minute: "5h12m", 30 * time.Hour: "30h",
		76 * time.Hour: "3d4h", 12 * 24 * time.Hour: "12d", -time.Second: "0s",
	}
	for d, want := range cases {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestCheckOutput(t *testing.T) {
	if err := checkOutput("", "json"); err != nil {
		t.Errorf("no -o: %v", err)
	}
	if err := checkOutput("yaml", "json", "yaml"); err != nil {
		t.Errorf("-o yaml: %v", err)
	}
	err := checkOutput("xml", "wide", "json")
	if err == nil || err.Error() != `--output "xml": must be wide, json, or left out for a table` {
		t.Errorf("-o xml: %v", err)
	}
}
