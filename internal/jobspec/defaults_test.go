package jobspec

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

func TestDefault(t *testing.T) {
	cmd := []string{"python3", "train.py"}
	cases := map[string]struct {
		job  v1.TrainJob
		want *v1.TrainJob
	}{
		"fills every field left out": {
			job: v1.TrainJob{Spec: v1.TrainJobSpec{Command: cmd}},
			want: typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(1)),
				ProcsPerWorker:                ptr(int32(1)),
				Command:                       cmd,
				WorkingDir:                    "/home/ada/project",
				StoragePath:                   "/home/ada/trainyard_results",
				RunName:                       "train-20261122-134501-xxxx",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
			}}),
		},
		"procsPerWorker defaults to the worker's GPU count": {
			job: v1.TrainJob{Spec: v1.TrainJobSpec{Command: cmd, Resources: v1.WorkerResources{GPU: 8}}},
			want: typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(1)),
				ProcsPerWorker:                ptr(int32(8)),
				Resources:                     v1.WorkerResources{GPU: 8},
				Command:                       cmd,
				WorkingDir:                    "/home/ada/project",
				StoragePath:                   "/home/ada/trainyard_results",
				RunName:                       "train-20261122-134501-xxxx",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
			}}),
		},
		"metadata.name becomes the run name": {
			job: v1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "bert-large"}, Spec: v1.TrainJobSpec{Command: cmd}},
			want: typeMeta(v1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "bert-large"}, Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(1)),
				ProcsPerWorker:                ptr(int32(1)),
				Command:                       cmd,
				WorkingDir:                    "/home/ada/project",
				StoragePath:                   "/home/ada/trainyard_results",
				RunName:                       "bert-large",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
			}}),
		},
		"a run name the user set wins over metadata.name": {
			job: v1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "bert-large"}, Spec: v1.TrainJobSpec{Command: cmd, RunName: "second-try"}},
			want: typeMeta(v1.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "bert-large"}, Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(1)),
				ProcsPerWorker:                ptr(int32(1)),
				Command:                       cmd,
				WorkingDir:                    "/home/ada/project",
				StoragePath:                   "/home/ada/trainyard_results",
				RunName:                       "second-try",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
			}}),
		},
		"relative paths are made absolute against the working folder": {
			job: v1.TrainJob{Spec: v1.TrainJobSpec{Command: cmd, WorkingDir: "src", StoragePath: "../runs", RunName: "r"}},
			want: typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(1)),
				ProcsPerWorker:                ptr(int32(1)),
				Command:                       cmd,
				WorkingDir:                    "/home/ada/project/src",
				StoragePath:                   "/home/ada/runs",
				RunName:                       "r",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
			}}),
		},
		"~ is the injected home folder": {
			job: v1.TrainJob{Spec: v1.TrainJobSpec{Command: cmd, WorkingDir: "~/code", StoragePath: "~", RunName: "r"}},
			want: typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(1)),
				ProcsPerWorker:                ptr(int32(1)),
				Command:                       cmd,
				WorkingDir:                    "/home/ada/code",
				StoragePath:                   "/home/ada",
				RunName:                       "r",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
			}}),
		},
		"absolute paths are cleaned and kept": {
			job: v1.TrainJob{Spec: v1.TrainJobSpec{Command: cmd, WorkingDir: "/srv//code/", StoragePath: "/data/x/../runs", RunName: "r"}},
			want: typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(1)),
				ProcsPerWorker:                ptr(int32(1)),
				Command:                       cmd,
				WorkingDir:                    "/srv/code",
				StoragePath:                   "/data/runs",
				RunName:                       "r",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
			}}),
		},
		"values the user set are kept, even invalid ones, for Validate to judge": {
			job: v1.TrainJob{Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(0)),
				ProcsPerWorker:                ptr(int32(0)),
				Resources:                     v1.WorkerResources{GPU: 4},
				Command:                       cmd,
				RunName:                       "../x",
				TerminationGracePeriodSeconds: ptr(int64(0)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
				MaxRestarts:                   -1,
			}},
			want: typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(0)),
				ProcsPerWorker:                ptr(int32(0)),
				Resources:                     v1.WorkerResources{GPU: 4},
				Command:                       cmd,
				WorkingDir:                    "/home/ada/project",
				StoragePath:                   "/home/ada/trainyard_results",
				RunName:                       "../x",
				TerminationGracePeriodSeconds: ptr(int64(0)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
				MaxRestarts:                   -1,
			}}),
		},
		"apiVersion and kind are set": {
			job: v1.TrainJob{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Spec: v1.TrainJobSpec{Command: cmd, RunName: "r"}},
			want: typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(1)),
				ProcsPerWorker:                ptr(int32(1)),
				Command:                       cmd,
				WorkingDir:                    "/home/ada/project",
				StoragePath:                   "/home/ada/trainyard_results",
				RunName:                       "r",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
			}}),
		},
		"the run name comes from the script even when it is in args": {
			job: v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"python3"}, Args: []string{"scripts/finetune.py", "--lr", "3e-4"}}},
			want: typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{
				Workers:                       ptr(int32(1)),
				ProcsPerWorker:                ptr(int32(1)),
				Command:                       []string{"python3"},
				Args:                          []string{"scripts/finetune.py", "--lr", "3e-4"},
				WorkingDir:                    "/home/ada/project",
				StoragePath:                   "/home/ada/trainyard_results",
				RunName:                       "finetune-20261122-134501-xxxx",
				TerminationGracePeriodSeconds: ptr(int64(30)),
				ProcessGroupTimeoutSeconds:    ptr(int64(300)),
			}}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := clone(t, &tc.job)
			if err := Default(job, testEnv); err != nil {
				t.Fatalf("Default: %v", err)
			}
			maskRunName(t, job)
			if diff := cmp.Diff(tc.want, job, jobCmp); diff != "" {
				t.Errorf("Default mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultIsIdempotent(t *testing.T) {
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"python3", "train.py"}, WorkingDir: "src"}}
	if err := Default(job, testEnv); err != nil {
		t.Fatal(err)
	}
	once := clone(t, job)
	if err := Default(job, testEnv); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(once, job, jobCmp); diff != "" {
		t.Errorf("second Default changed the job (-want +got):\n%s", diff)
	}
}

// The zero Env uses the process's current folder, home folder and clock.
func TestDefaultZeroEnvUsesTheProcess(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Chdir(work)
	wd, err := os.Getwd() // work with symbolic links resolved, as Getwd reports it
	if err != nil {
		t.Fatal(err)
	}
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"python3", "train.py"}}}
	before := time.Now()
	if err := Default(job, Env{}); err != nil {
		t.Fatal(err)
	}
	want := struct{ WorkingDir, StoragePath string }{wd, filepath.Join(home, "trainyard_results")}
	got := struct{ WorkingDir, StoragePath string }{job.Spec.WorkingDir, job.Spec.StoragePath}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths mismatch (-want +got):\n%s", diff)
	}
	// The name carries the time, to the second, of the real clock.
	stamp := strings.TrimPrefix(job.Spec.RunName, "train-")
	at, err := time.ParseInLocation("20060102-150405", stamp[:len("20060102-150405")], time.Local)
	if err != nil {
		t.Fatalf("run name %q: %v", job.Spec.RunName, err)
	}
	if at.Before(before.Truncate(time.Second)) || at.After(time.Now()) {
		t.Errorf("run name %q has time %v, want between %v and now", job.Spec.RunName, at, before)
	}
}

func TestGenerateName(t *testing.T) {
	cases := map[string]struct {
		command []string
		want    string // the base, before "-<date>-<time>-<4 hex digits>"
	}{
		"python script":                      {command: []string{"python3", "train.py"}, want: "train"},
		"full paths and interpreter flags":   {command: []string{"/usr/bin/python3", "-u", "/src/My_Model.py", "--lr", "1"}, want: "my-model"},
		"launcher with flag values":          {command: []string{"torchrun", "--nproc-per-node", "4", "train.py"}, want: "train"},
		"arguments after the script ignored": {command: []string{"python3", "pretrain.py", "finetune"}, want: "pretrain"},
		"python module":                      {command: []string{"python3", "-m", "mypkg.train"}, want: "mypkg-train"},
		"shell script":                       {command: []string{"./run.sh"}, want: "run-sh"},
		"program alone":                      {command: []string{"/opt/bin/Trainer"}, want: "trainer"},
		"no command":                         {command: nil, want: "run"},
		"empty command":                      {command: []string{""}, want: "run"},
		"only flags":                         {command: []string{"--help"}, want: "run"},
		"nothing usable in the name":         {command: []string{"python3", "训练.py"}, want: "run"},
		"names longer than 40 are not used":  {command: []string{"python3", strings.Repeat("a", 41) + ".py"}, want: "run"},
		"a name of exactly 40 is used":       {command: []string{"python3", strings.Repeat("a", 40) + ".py"}, want: strings.Repeat("a", 40)},
		"separators collapse and trim":       {command: []string{"python3", "__my  model__.py"}, want: "my-model"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := GenerateName(tc.command, testNow)
			form := regexp.MustCompile(`^` + regexp.QuoteMeta(tc.want) + `-20261122-134501-[0-9a-f]{4}$`)
			if !form.MatchString(got) {
				t.Errorf("GenerateName(%q) = %q, want the form %s-20261122-134501-xxxx", tc.command, got, tc.want)
			}
			if !runName.MatchString(got) {
				t.Errorf("GenerateName(%q) = %q, which Validate would reject", tc.command, got)
			}
		})
	}
}

func TestGenerateNameUsesTheClockItIsGiven(t *testing.T) {
	at := time.Date(2027, time.January, 2, 3, 4, 5, 0, time.FixedZone("UTC+9", 9*60*60))
	got := GenerateName([]string{"python3", "train.py"}, at)
	if want := regexp.MustCompile(`^train-20270102-030405-[0-9a-f]{4}$`); !want.MatchString(got) {
		t.Errorf("GenerateName = %q, want the form train-20270102-030405-xxxx", got)
	}
}

func TestGenerateNameIsRandomAfterTheTime(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		seen[GenerateName([]string{"train.py"}, testNow)] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 names generated at the same second are all %v", seen)
	}
}
