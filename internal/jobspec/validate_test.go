package jobspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// goodJob is a defaulted job that Validate accepts; the cases below each break it.
func goodJob() *v1.TrainJob {
	return typeMeta(v1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "bert-large"},
		Spec: v1.TrainJobSpec{
			Workers:                       ptr(int32(2)),
			ProcsPerWorker:                ptr(int32(8)),
			Resources:                     v1.WorkerResources{CPU: quantity("500m"), Memory: quantity("8Gi"), GPU: 8},
			Command:                       []string{"python3", "train.py"},
			Env:                           []v1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "_private"}},
			WorkingDir:                    "/home/ada/project",
			StoragePath:                   "/home/ada/trainyard_results",
			RunName:                       "bert-large",
			MaxRestarts:                   3,
			TerminationGracePeriodSeconds: ptr(int64(5)),
			ProcessGroupTimeoutSeconds:    ptr(int64(300)),
		},
	})
}

// nameMessage is how an error states the rule of names.
const nameMessage = NameRule

const runNameMessage = "must start with a letter or digit and hold only letters, digits, '.', '_' and '-' (at most 128)"

func TestValidateAccepts(t *testing.T) {
	cases := map[string]func(s *v1.TrainJob){
		"the good job":     func(*v1.TrainJob) {},
		"no metadata.name": func(j *v1.TrainJob) { j.Name = "" },
		"limits": func(j *v1.TrainJob) {
			j.Spec.Workers, j.Spec.ProcsPerWorker = ptr(int32(MaxWorkers)), ptr(int32(MaxProcsPerWorker))
		},
		"no GPUs, CPU or memory asked":      func(j *v1.TrainJob) { j.Spec.Resources = v1.WorkerResources{} },
		"grace period 0 (kill at once)":     func(j *v1.TrainJob) { j.Spec.TerminationGracePeriodSeconds = ptr(int64(0)) },
		"resize interval 0 (at once)":       func(j *v1.TrainJob) { j.Spec.ResizeIntervalSeconds = ptr(int64(0)) },
		"resize interval of a week":         func(j *v1.TrainJob) { j.Spec.ResizeIntervalSeconds = ptr(int64(604800)) },
		"grace period of an hour":           func(j *v1.TrainJob) { j.Spec.TerminationGracePeriodSeconds = ptr(int64(3600)) },
		"empty env value":                   func(j *v1.TrainJob) { j.Spec.Env = []v1.EnvVar{{Name: "A"}} },
		"run name with dots and capitals":   func(j *v1.TrainJob) { j.Spec.RunName = "BERT_v1.2-try" },
		"run name of 128":                   func(j *v1.TrainJob) { j.Spec.RunName = strings.Repeat("r", 128) },
		"metadata.name of 45":               func(j *v1.TrainJob) { j.Name = "a" + strings.Repeat("-b", 22) },
		"metadata.name of one letter":       func(j *v1.TrainJob) { j.Name = "a" },
		"command with arguments only after": func(j *v1.TrainJob) { j.Spec.Command = []string{"python3"}; j.Spec.Args = []string{""} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			job := goodJob()
			mutate(job)
			if err := Validate(job); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string]struct {
		mutate func(j *v1.TrainJob)
		want   string
	}{
		"workers 0": {
			mutate: func(j *v1.TrainJob) { j.Spec.Workers = ptr(int32(0)) },
			want:   "invalid job: spec.workers: Invalid value: 0: must be between 1 and 10000",
		},
		"workers -1": {
			mutate: func(j *v1.TrainJob) { j.Spec.Workers = ptr(int32(-1)) },
			want:   "invalid job: spec.workers: Invalid value: -1: must be between 1 and 10000",
		},
		"workers above MaxWorkers": {
			mutate: func(j *v1.TrainJob) { j.Spec.Workers = ptr(int32(MaxWorkers + 1)) },
			want:   "invalid job: spec.workers: Invalid value: 10001: must be between 1 and 10000",
		},
		"workers not defaulted": {
			mutate: func(j *v1.TrainJob) { j.Spec.Workers = nil },
			want:   "invalid job: spec.workers: Required value",
		},
		"resizeIntervalSeconds -1": {
			mutate: func(j *v1.TrainJob) { j.Spec.ResizeIntervalSeconds = ptr(int64(-1)) },
			want:   "invalid job: spec.resizeIntervalSeconds: Invalid value: -1: must be between 0 (resize at once) and 604800 seconds (a week)",
		},
		"resizeIntervalSeconds past a week": {
			mutate: func(j *v1.TrainJob) { j.Spec.ResizeIntervalSeconds = ptr(int64(604801)) },
			want:   "invalid job: spec.resizeIntervalSeconds: Invalid value: 604801: must be between 0 (resize at once) and 604800 seconds (a week)",
		},
		"procsPerWorker 0": {
			mutate: func(j *v1.TrainJob) { j.Spec.ProcsPerWorker = ptr(int32(0)) },
			want:   "invalid job: spec.procsPerWorker: Invalid value: 0: must be between 1 and 1024",
		},
		"procsPerWorker above MaxProcsPerWorker": {
			mutate: func(j *v1.TrainJob) { j.Spec.ProcsPerWorker = ptr(int32(MaxProcsPerWorker + 1)) },
			want:   "invalid job: spec.procsPerWorker: Invalid value: 1025: must be between 1 and 1024",
		},
		"empty command": {
			mutate: func(j *v1.TrainJob) { j.Spec.Command = nil },
			want:   `invalid job: spec.command: Required value: the program each worker runs, e.g. ["/usr/bin/python3", "train.py"]`,
		},
		`command [""]`: {
			mutate: func(j *v1.TrainJob) { j.Spec.Command = []string{""} },
			want:   `invalid job: spec.command[0]: Invalid value: "": must name a program`,
		},
		"command of blanks": {
			mutate: func(j *v1.TrainJob) { j.Spec.Command = []string{"  ", "train.py"} },
			want:   `invalid job: spec.command[0]: Invalid value: "  ": must name a program`,
		},
		"env name starting with a digit": {
			mutate: func(j *v1.TrainJob) { j.Spec.Env = []v1.EnvVar{{Name: "1A", Value: "x"}} },
			want:   `invalid job: spec.env[0].name: Invalid value: "1A": must be letters, digits and '_', not starting with a digit`,
		},
		"env name with a dash": {
			mutate: func(j *v1.TrainJob) { j.Spec.Env = append(j.Spec.Env, v1.EnvVar{Name: "MY-VAR"}) },
			want:   `invalid job: spec.env[2].name: Invalid value: "MY-VAR": must be letters, digits and '_', not starting with a digit`,
		},
		"env name with =": {
			mutate: func(j *v1.TrainJob) { j.Spec.Env = []v1.EnvVar{{Name: "A=1"}} },
			want:   `invalid job: spec.env[0].name: Invalid value: "A=1": must be letters, digits and '_', not starting with a digit`,
		},
		"empty env name": {
			mutate: func(j *v1.TrainJob) { j.Spec.Env = []v1.EnvVar{{Value: "x"}} },
			want:   `invalid job: spec.env[0].name: Invalid value: "": must be letters, digits and '_', not starting with a digit`,
		},
		"duplicate env": {
			mutate: func(j *v1.TrainJob) {
				j.Spec.Env = []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}, {Name: "A", Value: "2"}}
			},
			want: `invalid job: spec.env[2].name: Duplicate value: "A"`,
		},
		"negative maxRestarts": {
			mutate: func(j *v1.TrainJob) { j.Spec.MaxRestarts = -1 },
			want:   "invalid job: spec.maxRestarts: Invalid value: -1: must be between 0 and 10000",
		},
		"maxRestarts above MaxRestarts": {
			mutate: func(j *v1.TrainJob) { j.Spec.MaxRestarts = MaxRestarts + 1 },
			want:   "invalid job: spec.maxRestarts: Invalid value: 10001: must be between 0 and 10000",
		},
		"negative cpu": {
			mutate: func(j *v1.TrainJob) { j.Spec.Resources.CPU = quantity("-1") },
			want:   `invalid job: spec.resources.cpu: Invalid value: "-1": must be greater than zero`,
		},
		"zero cpu": {
			mutate: func(j *v1.TrainJob) { j.Spec.Resources.CPU = quantity("0") },
			want:   `invalid job: spec.resources.cpu: Invalid value: "0": must be greater than zero`,
		},
		"negative memory": {
			mutate: func(j *v1.TrainJob) { j.Spec.Resources.Memory = quantity("-8Gi") },
			want:   `invalid job: spec.resources.memory: Invalid value: "-8Gi": must be greater than zero`,
		},
		"gpu -1": {
			mutate: func(j *v1.TrainJob) { j.Spec.Resources.GPU = -1 },
			want:   "invalid job: spec.resources.gpu: Invalid value: -1: must be between 0 and 1024",
		},
		"gpu above 1024": {
			mutate: func(j *v1.TrainJob) { j.Spec.Resources.GPU = 1025 },
			want:   "invalid job: spec.resources.gpu: Invalid value: 1025: must be between 0 and 1024",
		},
		"negative grace period": {
			mutate: func(j *v1.TrainJob) { j.Spec.TerminationGracePeriodSeconds = ptr(int64(-1)) },
			want:   "invalid job: spec.terminationGracePeriodSeconds: Invalid value: -1: must be between 0 and 3600 seconds",
		},
		"grace period over an hour": {
			mutate: func(j *v1.TrainJob) { j.Spec.TerminationGracePeriodSeconds = ptr(int64(3601)) },
			want:   "invalid job: spec.terminationGracePeriodSeconds: Invalid value: 3601: must be between 0 and 3600 seconds",
		},
		"no storagePath": {
			mutate: func(j *v1.TrainJob) { j.Spec.StoragePath = "" },
			want:   "invalid job: spec.storagePath: Required value: the folder that holds runs",
		},
		"storagePath s3:// with a bad bucket": {
			mutate: func(j *v1.TrainJob) { j.Spec.StoragePath = "s3://My_Bucket/experiments" },
			want: `invalid job: spec.storagePath: Invalid value: "s3://My_Bucket/experiments": s3://My_Bucket/experiments: ` +
				`"My_Bucket" is not a bucket name (3 to 63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit)`,
		},
		"storagePath gs://": {
			mutate: func(j *v1.TrainJob) { j.Spec.StoragePath = "gs://b" },
			want: `invalid job: spec.storagePath: Invalid value: "gs://b": gs://b: gs:// is not supported yet; use Cloud Storage's S3-compatible API instead: ` +
				`s3://b with AWS_ENDPOINT_URL=https://storage.googleapis.com and an HMAC key in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or a folder every worker shares`,
		},
		"storagePath hdfs://": {
			mutate: func(j *v1.TrainJob) { j.Spec.StoragePath = "hdfs://nn/x" },
			want:   `invalid job: spec.storagePath: Invalid value: "hdfs://nn/x": hdfs://nn/x: the scheme hdfs:// is not supported: give s3://bucket/prefix or a folder`,
		},
		"runName ../x": {
			mutate: func(j *v1.TrainJob) { j.Spec.RunName = "../x" },
			want:   `invalid job: spec.runName: Invalid value: "../x": ` + runNameMessage,
		},
		"runName with a space": {
			mutate: func(j *v1.TrainJob) { j.Spec.RunName = "a b" },
			want:   `invalid job: spec.runName: Invalid value: "a b": ` + runNameMessage,
		},
		"runName with a slash": {
			mutate: func(j *v1.TrainJob) { j.Spec.RunName = "a/b" },
			want:   `invalid job: spec.runName: Invalid value: "a/b": ` + runNameMessage,
		},
		"runName ..": {
			mutate: func(j *v1.TrainJob) { j.Spec.RunName = ".." },
			want:   `invalid job: spec.runName: Invalid value: "..": ` + runNameMessage,
		},
		"runName hidden folder": {
			mutate: func(j *v1.TrainJob) { j.Spec.RunName = ".x" },
			want:   `invalid job: spec.runName: Invalid value: ".x": ` + runNameMessage,
		},
		"empty runName": {
			mutate: func(j *v1.TrainJob) { j.Spec.RunName = "" },
			want:   `invalid job: spec.runName: Invalid value: "": ` + runNameMessage,
		},
		"runName of 129": {
			mutate: func(j *v1.TrainJob) { j.Spec.RunName = strings.Repeat("r", 129) },
			want:   `invalid job: spec.runName: Invalid value: "` + strings.Repeat("r", 129) + `": ` + runNameMessage,
		},
		"metadata.name with capitals": {
			mutate: func(j *v1.TrainJob) { j.Name = "BertLarge" },
			want:   `invalid job: metadata.name: Invalid value: "BertLarge": ` + nameMessage,
		},
		"metadata.name with an underscore": {
			mutate: func(j *v1.TrainJob) { j.Name = "bert_large" },
			want:   `invalid job: metadata.name: Invalid value: "bert_large": ` + nameMessage,
		},
		"dotted metadata.name": {
			mutate: func(j *v1.TrainJob) { j.Name = "team.bert-large" },
			want:   `invalid job: metadata.name: Invalid value: "team.bert-large": ` + nameMessage,
		},
		"metadata.name of 46": {
			mutate: func(j *v1.TrainJob) { j.Name = strings.Repeat("a", 46) },
			want:   `invalid job: metadata.name: Invalid value: "` + strings.Repeat("a", 46) + `": ` + nameMessage,
		},
		"metadata.name starting with a digit": {
			mutate: func(j *v1.TrainJob) { j.Name = "7b" },
			want:   `invalid job: metadata.name: Invalid value: "7b": ` + nameMessage,
		},
		"metadata.name ending with '-'": {
			mutate: func(j *v1.TrainJob) { j.Name = "bert-" },
			want:   `invalid job: metadata.name: Invalid value: "bert-": ` + nameMessage,
		},
		"several problems, one per line in field order": {
			mutate: func(j *v1.TrainJob) {
				j.Name = "Bad Name"
				j.Spec.Workers = ptr(int32(0))
				j.Spec.ProcsPerWorker = ptr(int32(0))
				j.Spec.Resources.GPU = -1
				j.Spec.Command = nil
				j.Spec.Env = []v1.EnvVar{{Name: "A"}, {Name: "A"}}
				j.Spec.MaxRestarts = -1
				j.Spec.RunName = "a b"
			},
			want: "invalid job:\n" +
				`  metadata.name: Invalid value: "Bad Name": ` + nameMessage + "\n" +
				"  spec.workers: Invalid value: 0: must be between 1 and 10000\n" +
				"  spec.procsPerWorker: Invalid value: 0: must be between 1 and 1024\n" +
				"  spec.resources.gpu: Invalid value: -1: must be between 0 and 1024\n" +
				`  spec.command: Required value: the program each worker runs, e.g. ["/usr/bin/python3", "train.py"]` + "\n" +
				`  spec.env[1].name: Duplicate value: "A"` + "\n" +
				"  spec.maxRestarts: Invalid value: -1: must be between 0 and 10000\n" +
				`  spec.runName: Invalid value: "a b": ` + runNameMessage,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := goodJob()
			tc.mutate(job)
			err := Validate(job)
			if diff := cmp.Diff(tc.want, errString(err)); diff != "" {
				t.Errorf("Validate error mismatch (-want +got):\n%s", diff)
			}
			var inv *Invalid
			if !errors.As(err, &inv) {
				t.Fatalf("Validate returned %T, want *Invalid", err)
			}
			want := max(1, strings.Count(tc.want, "\n  ")) // one problem per line
			if got := len(inv.Errs); got != want {
				t.Errorf("Invalid.Errs has %d errors, want %d", got, want)
			}
		})
	}
}

// Invalid names the flag that sets a field when it has one.
func TestInvalidNamesFlags(t *testing.T) {
	job := goodJob()
	job.Spec.Workers = ptr(int32(0))
	job.Spec.Env = []v1.EnvVar{{Name: "1A"}}
	err := Validate(job)
	var inv *Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("Validate = %v, want *Invalid", err)
	}
	inv.Flags = map[string]string{"spec.workers": "--workers"}
	want := "invalid job:\n" +
		"  --workers (spec.workers): Invalid value: 0: must be between 1 and 10000\n" +
		`  spec.env[0].name: Invalid value: "1A": must be letters, digits and '_', not starting with a digit`
	if diff := cmp.Diff(want, inv.Error()); diff != "" {
		t.Errorf("error mismatch (-want +got):\n%s", diff)
	}
}
