package jobspec

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// resolve parses args as the run command does (flags, then the command after "--")
// and resolves the job against testEnv.
func resolve(t *testing.T, args ...string) (*v1.TrainJob, error) {
	t.Helper()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(false)
	var f Flags
	f.Bind(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	job, err := f.Resolve(fs.Args(), testEnv)
	maskRunName(t, job)
	return job, err
}

// jobFile is a file a few cases pass with -f; every value differs from the defaults
// and from the flags the cases set.
const jobFile = `apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata:
  name: from-file
spec:
  workers: 4
  procsPerWorker: 2
  resources:
    cpu: "8"
    memory: 32Gi
    gpu: 2
  command: [python3]
  args: [file_train.py, --epochs, "3"]
  env:
    - name: A
      value: file
    - name: KEEP
      value: file
  workingDir: src
  storagePath: /data/runs
  runName: file-run
  maxRestarts: 2
  terminationGracePeriodSeconds: 30
`

// fileJob is jobFile resolved with no flags, in a folder holding it as job.yaml.
func fileJob() *v1.TrainJob {
	return typeMeta(v1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "from-file"},
		Spec: v1.TrainJobSpec{
			Workers:                       ptr(int32(4)),
			ProcsPerWorker:                ptr(int32(2)),
			Resources:                     v1.WorkerResources{CPU: quantity("8"), Memory: quantity("32Gi"), GPU: 2},
			Command:                       []string{"python3"},
			Args:                          []string{"file_train.py", "--epochs", "3"},
			Env:                           []v1.EnvVar{{Name: "A", Value: "file"}, {Name: "KEEP", Value: "file"}},
			WorkingDir:                    "/home/ada/project/src",
			StoragePath:                   "/data/runs",
			RunName:                       "file-run",
			MaxRestarts:                   2,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			ProcessGroupTimeoutSeconds:    ptr(int64(300)),
		},
	})
}

// flagsJob is the job `-- python3 train.py` gives with no other flags.
func flagsJob() *v1.TrainJob {
	return typeMeta(v1.TrainJob{Spec: v1.TrainJobSpec{
		Workers:                       ptr(int32(1)),
		ProcsPerWorker:                ptr(int32(1)),
		Command:                       []string{"python3", "train.py"},
		WorkingDir:                    "/home/ada/project",
		StoragePath:                   "/home/ada/trainyard_results",
		RunName:                       "train-20261122-134501-xxxx",
		TerminationGracePeriodSeconds: ptr(int64(30)),
		ProcessGroupTimeoutSeconds:    ptr(int64(300)),
	}})
}

func with(job *v1.TrainJob, mutate func(j *v1.TrainJob)) *v1.TrainJob {
	mutate(job)
	return job
}

func TestFlagsResolve(t *testing.T) {
	// The cases run in a folder holding jobFile as job.yaml, so that "-f job.yaml" and
	// error messages naming it do not depend on where the test runs.
	t.Chdir(t.TempDir())
	if err := os.WriteFile("job.yaml", []byte(jobFile), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args    []string
		want    *v1.TrainJob
		wantErr string
	}{
		"command only": {
			args: []string{"--", "python3", "train.py"},
			want: flagsJob(),
		},
		"command without --": {
			args: []string{"python3", "train.py"},
			want: flagsJob(),
		},
		"the command's own flags are not trainyard's": {
			args: []string{"--workers", "2", "python3", "train.py", "--workers", "9"},
			want: with(flagsJob(), func(j *v1.TrainJob) {
				j.Spec.Workers = ptr(int32(2))
				j.Spec.Command = []string{"python3", "train.py", "--workers", "9"}
			}),
		},
		"workers, GPUs and env": {
			args: []string{"--workers", "2", "--gpus-per-worker", "1", "--env", "A=1", "--env", "B=2", "--", "python3", "train.py"},
			want: with(flagsJob(), func(j *v1.TrainJob) {
				j.Spec.Workers = ptr(int32(2))
				j.Spec.Resources.GPU = 1
				j.Spec.Env = []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
			}),
		},
		"procsPerWorker follows --gpus-per-worker": {
			args: []string{"--gpus-per-worker", "4", "--", "python3", "train.py"},
			want: with(flagsJob(), func(j *v1.TrainJob) {
				j.Spec.Resources.GPU = 4
				j.Spec.ProcsPerWorker = ptr(int32(4))
			}),
		},
		"--procs-per-worker wins over the GPU count": {
			args: []string{"--gpus-per-worker", "4", "--procs-per-worker", "1", "--", "python3", "train.py"},
			want: with(flagsJob(), func(j *v1.TrainJob) {
				j.Spec.Resources.GPU = 4
				j.Spec.ProcsPerWorker = ptr(int32(1))
			}),
		},
		"every flag": {
			args: []string{
				"--workers", "3", "--procs-per-worker", "2", "--gpus-per-worker", "2",
				"--cpus-per-worker", "500m", "--memory-per-worker", "8Gi",
				"-e", "X=1", "--env", "EMPTY=", "--env", "EQ=a=b",
				"--workdir", "code", "--storage-path", "~/runs", "--name", "exp-7",
				"--max-restarts", "5", "--grace-period", "10s",
				"--", "torchrun", "train.py", "--lr", "0.1",
			},
			want: typeMeta(v1.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: "exp-7"},
				Spec: v1.TrainJobSpec{
					Workers:                       ptr(int32(3)),
					ProcsPerWorker:                ptr(int32(2)),
					Resources:                     v1.WorkerResources{CPU: quantity("500m"), Memory: quantity("8Gi"), GPU: 2},
					Command:                       []string{"torchrun", "train.py", "--lr", "0.1"},
					Env:                           []v1.EnvVar{{Name: "X", Value: "1"}, {Name: "EMPTY"}, {Name: "EQ", Value: "a=b"}},
					WorkingDir:                    "/home/ada/project/code",
					StoragePath:                   "/home/ada/runs",
					RunName:                       "exp-7",
					MaxRestarts:                   5,
					TerminationGracePeriodSeconds: ptr(int64(10)),
					ProcessGroupTimeoutSeconds:    ptr(int64(300)),
				},
			}),
		},
		"--grace-period 1500ms rounds up to 2 seconds": {
			args: []string{"--grace-period", "1500ms", "--", "python3", "train.py"},
			want: with(flagsJob(), func(j *v1.TrainJob) { j.Spec.TerminationGracePeriodSeconds = ptr(int64(2)) }),
		},
		"--grace-period 0 kills at once": {
			args: []string{"--grace-period", "0", "--", "python3", "train.py"},
			want: with(flagsJob(), func(j *v1.TrainJob) { j.Spec.TerminationGracePeriodSeconds = ptr(int64(0)) }),
		},
		"--resize-interval 90s": {
			args: []string{"--workers", "1:3", "--resize-interval", "90s", "--", "python3", "train.py"},
			want: with(flagsJob(), func(j *v1.TrainJob) {
				j.Spec.Workers, j.Spec.MinWorkers = ptr(int32(3)), ptr(int32(1))
				j.Spec.ResizeIntervalSeconds = ptr(int64(90))
			}),
		},
		"--resize-interval 0 resizes at once": {
			args: []string{"--resize-interval", "0", "--", "python3", "train.py"},
			want: with(flagsJob(), func(j *v1.TrainJob) { j.Spec.ResizeIntervalSeconds = ptr(int64(0)) }),
		},
		"--resize-interval -1m": {
			args:    []string{"--resize-interval", "-1m", "--", "python3", "train.py"},
			wantErr: "--resize-interval -1m0s: give a duration from 0 (resize at once) to 168h0m0s, e.g. 10m",
		},
		"--resize-interval past a week": {
			args:    []string{"--resize-interval", "169h", "--", "python3", "train.py"},
			wantErr: "--resize-interval 169h0m0s: give a duration from 0 (resize at once) to 168h0m0s, e.g. 10m",
		},
		"--resize-interval ten is a parse error": {
			args:    []string{"--resize-interval", "ten", "--", "python3", "train.py"},
			wantErr: `invalid argument "ten" for "--resize-interval" flag: time: invalid duration "ten"`,
		},
		"a later --env of the same name wins": {
			args: []string{"--env", "A=1", "--env", "A=2", "--", "python3", "train.py"},
			want: with(flagsJob(), func(j *v1.TrainJob) { j.Spec.Env = []v1.EnvVar{{Name: "A", Value: "2"}} }),
		},

		"the file alone": {
			args: []string{"-f", "job.yaml"},
			want: fileJob(),
		},
		"flags override the file only where set": {
			args: []string{"-f", "job.yaml", "--workers", "8", "--gpus-per-worker", "8", "--memory-per-worker", "64Gi", "--grace-period", "1m"},
			want: with(fileJob(), func(j *v1.TrainJob) {
				j.Spec.Workers = ptr(int32(8))
				j.Spec.Resources.GPU = 8
				j.Spec.Resources.Memory = quantity("64Gi")
				j.Spec.TerminationGracePeriodSeconds = ptr(int64(60))
			}),
		},
		"flags set to their defaults still override the file": {
			args: []string{"-f", "job.yaml", "--workers", "1", "--procs-per-worker", "1", "--gpus-per-worker", "0", "--max-restarts", "0", "--grace-period", "5s"},
			want: with(fileJob(), func(j *v1.TrainJob) {
				j.Spec.Workers = ptr(int32(1))
				j.Spec.ProcsPerWorker = ptr(int32(1))
				j.Spec.Resources.GPU = 0
				j.Spec.MaxRestarts = 0
				j.Spec.TerminationGracePeriodSeconds = ptr(int64(5))
			}),
		},
		"the command after -- replaces the file's command and args": {
			args: []string{"-f", "job.yaml", "--", "python3", "train.py", "--lr", "0.01"},
			want: with(fileJob(), func(j *v1.TrainJob) {
				j.Spec.Command = []string{"python3", "train.py", "--lr", "0.01"}
				j.Spec.Args = nil
			}),
		},
		"--env replaces a file variable of the same name and adds new ones": {
			args: []string{"-f", "job.yaml", "--env", "A=flag", "--env", "NEW=flag"},
			want: with(fileJob(), func(j *v1.TrainJob) {
				j.Spec.Env = []v1.EnvVar{{Name: "A", Value: "flag"}, {Name: "KEEP", Value: "file"}, {Name: "NEW", Value: "flag"}}
			}),
		},
		"--name replaces the file's name and run name": {
			args: []string{"-f", "job.yaml", "--name", "retry-2"},
			want: with(fileJob(), func(j *v1.TrainJob) {
				j.Name = "retry-2"
				j.Spec.RunName = "retry-2"
			}),
		},
		"--workdir and --storage-path are relative to the current folder, not the file's": {
			args: []string{"-f", "job.yaml", "--workdir", "other", "--storage-path", "runs"},
			want: with(fileJob(), func(j *v1.TrainJob) {
				j.Spec.WorkingDir = "/home/ada/project/other"
				j.Spec.StoragePath = "/home/ada/project/runs"
			}),
		},

		"--env without =": {
			args:    []string{"--env", "NOEQUALS", "--", "python3", "train.py"},
			wantErr: `--env "NOEQUALS": must be KEY=VALUE`,
		},
		"--env with no name": {
			args:    []string{"--env", "=1", "--", "python3", "train.py"},
			wantErr: `--env "=1": must be KEY=VALUE`,
		},
		"--env with a bad name": {
			args:    []string{"--env", "1A=1", "--", "python3", "train.py"},
			wantErr: `invalid job: spec.env[0].name: Invalid value: "1A": must be letters, digits and '_', not starting with a digit`,
		},
		"--cpus-per-worker abc": {
			args:    []string{"--cpus-per-worker", "abc", "--", "python3", "train.py"},
			wantErr: `--cpus-per-worker "abc": not a quantity (examples: 4, 500m, 8Gi)`,
		},
		"--memory-per-worker 8 gigs": {
			args:    []string{"--memory-per-worker", "8 gigs", "--", "python3", "train.py"},
			wantErr: `--memory-per-worker "8 gigs": not a quantity (examples: 4, 500m, 8Gi)`,
		},
		"--workers 0 names the flag": {
			args:    []string{"--workers", "0", "--", "python3", "train.py"},
			wantErr: "invalid job: --workers (spec.workers): Invalid value: 0: must be between 1 and 10000",
		},
		"--workers abc is a parse error": {
			args:    []string{"--workers", "abc", "--", "python3", "train.py"},
			wantErr: `invalid argument "abc" for "--workers" flag: want a number of workers, or MIN:MAX for an elastic gang (2:4)`,
		},
		"no command names what is missing": {
			args:    []string{"--workers", "2"},
			wantErr: `invalid job: the command after -- (spec.command): Required value: the program each worker runs, e.g. ["/usr/bin/python3", "train.py"]`,
		},
		"several bad flags, each named": {
			args: []string{"--workers", "0", "--procs-per-worker", "-1", "--gpus-per-worker", "-1", "--cpus-per-worker", "-2",
				"--max-restarts", "-1", "--grace-period", "-3s", "--name", "Bad", "--", "python3", "train.py"},
			wantErr: "invalid job:\n" +
				`  --name (metadata.name): Invalid value: "Bad": ` + nameMessage + "\n" +
				"  --workers (spec.workers): Invalid value: 0: must be between 1 and 10000\n" +
				"  --procs-per-worker (spec.procsPerWorker): Invalid value: -1: must be between 1 and 1024\n" +
				`  --cpus-per-worker (spec.resources.cpu): Invalid value: "-2": must be greater than zero` + "\n" +
				"  --gpus-per-worker (spec.resources.gpu): Invalid value: -1: must be between 0 and 1024\n" +
				"  --max-restarts (spec.maxRestarts): Invalid value: -1: must be between 0 and 10000\n" +
				"  --grace-period (spec.terminationGracePeriodSeconds): Invalid value: -3: must be between 0 and 3600 seconds",
		},
		"with a file, errors name the field, which the file may have set": {
			args:    []string{"-f", "job.yaml", "--workers", "0"},
			wantErr: "invalid job: spec.workers: Invalid value: 0: must be between 1 and 10000",
		},
		"a file that does not load": {
			args:    []string{"-f", "missing.yaml", "--", "python3", "train.py"},
			wantErr: "read job file: open missing.yaml: no such file or directory",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := resolve(t, tc.args...)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("resolve(%q) error mismatch (-want +got):\n%s", tc.args, diff)
			}
			if diff := cmp.Diff(tc.want, got, jobCmp); diff != "" {
				t.Errorf("resolve(%q) mismatch (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// The same job, written as a file or as flags, resolves to the same object.
func TestFlagsAndFileAgree(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "job.yaml")
	doc := `apiVersion: trainyard.dev/v1alpha1
kind: TrainJob
metadata:
  name: same-job
spec:
  workers: 2
  procsPerWorker: 4
  resources:
    cpu: 1500m
    memory: 16Gi
    gpu: 4
  command: [python3, train.py, --lr, "0.1"]
  env:
    - name: NCCL_DEBUG
      value: INFO
    - name: OMP_NUM_THREADS
      value: "4"
  workingDir: /srv/code
  storagePath: ~/runs
  maxRestarts: 3
  terminationGracePeriodSeconds: 20
`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile, err := resolve(t, "-f", path)
	if err != nil {
		t.Fatalf("from the file: %v", err)
	}
	fromFlags, err := resolve(t,
		"--name", "same-job", "--workers", "2", "--procs-per-worker", "4",
		"--cpus-per-worker", "1.5", "--memory-per-worker", "16Gi", "--gpus-per-worker", "4",
		"--env", "NCCL_DEBUG=INFO", "--env", "OMP_NUM_THREADS=4",
		"--workdir", "/srv/code", "--storage-path", "~/runs",
		"--max-restarts", "3", "--grace-period", "20s",
		"--", "python3", "train.py", "--lr", "0.1")
	if err != nil {
		t.Fatalf("from flags: %v", err)
	}
	if diff := cmp.Diff(fromFile, fromFlags, jobCmp); diff != "" {
		t.Errorf("file and flags disagree (-file +flags):\n%s", diff)
	}
}

// Job without Bind (no FlagSet) takes only the file and the command.
func TestFlagsJobUnbound(t *testing.T) {
	f := Flags{Workers: Workers{Max: 7}}
	got, err := f.Job([]string{"python3", "train.py"})
	if err != nil {
		t.Fatal(err)
	}
	want := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: []string{"python3", "train.py"}}}
	if diff := cmp.Diff(want, got, jobCmp); diff != "" {
		t.Errorf("Job mismatch (-want +got):\n%s", diff)
	}
}
