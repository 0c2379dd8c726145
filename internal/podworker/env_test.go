package podworker

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// podEnv is a pod's environment as the operator and the Job controller set it.
func podEnv(t *testing.T, job *v1.TrainJob) map[string]string {
	t.Helper()
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		workload.EnvJob:        string(data),
		workload.EnvAttempt:    "2",
		workload.EnvWorker:     "1",
		workload.EnvMasterAddr: "mnist-a2-0.mnist-a2",
		workload.EnvMasterPort: "29500",
		workload.EnvMilliCPU:   "2500",
	}
}

// lookup returns a lookup function over env, as os.LookupEnv is over the process's.
func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// operatorJob is a TrainJob as the operator passes it: defaulted, with a run name.
func operatorJob(t *testing.T) *v1.TrainJob {
	t.Helper()
	workers := int32(2)
	return &v1.TrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.Kind},
		Spec: v1.TrainJobSpec{Workers: &workers, Command: []string{"python3", "train.py"},
			StoragePath: filepath.Join(t.TempDir(), "results"), RunName: "mnist-0f1e2d3c", WorkingDir: t.TempDir()},
	}
}

func TestParseEnv(t *testing.T) {
	job := operatorJob(t)
	cfg, err := ParseEnv(lookup(podEnv(t, job)))
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		Attempt, Worker, Port, Procs int
		Addr, Run, Storage, WorkDir  string
	}{cfg.Attempt, cfg.Worker, cfg.MasterPort, cfg.Job.Spec.ProcCount(), cfg.MasterAddr, cfg.Job.Spec.RunName,
		cfg.Job.Spec.StoragePath, cfg.Job.Spec.WorkingDir}
	want := got
	want.Attempt, want.Worker, want.Port, want.Procs = 2, 1, 29500, 1
	want.Addr, want.Run, want.Storage, want.WorkDir = "mnist-a2-0.mnist-a2", "mnist-0f1e2d3c", job.Spec.StoragePath, job.Spec.WorkingDir
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if g := cfg.Job.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("grace period %v, want the default 30 filled in", g)
	}
	if cfg.MilliCPU != 2500 {
		t.Errorf("MilliCPU %d, want the container's request, 2500", cfg.MilliCPU)
	}
}

func TestParseEnvRejects(t *testing.T) {
	cases := map[string]struct {
		job    func(*v1.TrainJob)
		env    func(map[string]string)
		want   []string // in the error, in order
		worker int      // cfg.Worker as returned
	}{
		"nothing set": {
			env: func(env map[string]string) { clear(env) },
			want: []string{"TRAINYARD_JOB: not set", "TRAINYARD_ATTEMPT: not set", "JOB_COMPLETION_INDEX: not set",
				"MASTER_ADDR: not set", "MASTER_PORT: not set"},
			worker: -1,
		},
		"job not JSON": {
			env:    func(env map[string]string) { env[workload.EnvJob] = "{spec: [" },
			want:   []string{"TRAINYARD_JOB: not a TrainJob: not valid YAML"},
			worker: 1,
		},
		"job with an unknown field": {
			env: func(env map[string]string) {
				env[workload.EnvJob] = strings.Replace(env[workload.EnvJob], `"spec":{`, `"spec":{"wrokers":3,`, 1)
			},
			want:   []string{`TRAINYARD_JOB: not a TrainJob: unknown field "spec.wrokers"`},
			worker: 1,
		},
		"job without run name and storage path": {
			job:    func(job *v1.TrainJob) { job.Spec.RunName, job.Spec.StoragePath = "", "" },
			want:   []string{"TRAINYARD_JOB: spec.runName and spec.storagePath not set"},
			worker: 1,
		},
		"invalid job": {
			job:    func(job *v1.TrainJob) { job.Spec.Command = nil },
			want:   []string{"TRAINYARD_JOB: invalid job: spec.command: Required value"},
			worker: 1,
		},
		"attempt zero": {
			env:    func(env map[string]string) { env[workload.EnvAttempt] = "0" },
			want:   []string{`TRAINYARD_ATTEMPT: must be a whole number from 1 to 1073741824, got "0"`},
			worker: 1,
		},
		"CPU request not a number": {
			env:    func(env map[string]string) { env[workload.EnvMilliCPU] = "2.5" },
			want:   []string{`TRAINYARD_WORKER_MILLICPU: must be a whole number from 0 to 1073741824, got "2.5"`},
			worker: 1,
		},
		"index beyond the workers": {
			env:    func(env map[string]string) { env[workload.EnvWorker] = "2" },
			want:   []string{`JOB_COMPLETION_INDEX: must be a whole number from 0 to 1, got "2"`},
			worker: -1,
		},
		"index not a number, empty address, port out of range": {
			env: func(env map[string]string) {
				env[workload.EnvWorker], env[workload.EnvMasterAddr], env[workload.EnvMasterPort] = "one", " ", "70000"
			},
			want: []string{`JOB_COMPLETION_INDEX: must be a whole number from 0 to 1, got "one"`, "MASTER_ADDR: empty",
				`MASTER_PORT: must be a whole number from 1 to 65535, got "70000"`},
			worker: -1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := operatorJob(t)
			if tc.job != nil {
				tc.job(job)
			}
			env := podEnv(t, job)
			if tc.env != nil {
				tc.env(env)
			}
			cfg, err := ParseEnv(lookup(env))
			if err == nil {
				t.Fatal("ParseEnv succeeded")
			}
			var envErr *EnvError
			if !errors.As(err, &envErr) {
				t.Errorf("error %v is no *EnvError", err)
			}
			msg, at := err.Error(), 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error lacks %q (in order):\n%s", w, msg)
				}
				at += i + len(w)
			}
			if cfg.Worker != tc.worker {
				t.Errorf("Worker = %d, want %d", cfg.Worker, tc.worker)
			}
		})
	}
}
