package jobspec

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// Flags are the command-line flags that describe a job. Every command that takes a job
// (run, submit) binds them, so a job reads the same everywhere.
type Flags struct {
	File        string
	Workers     Workers
	Procs       int32
	GPUs        int32
	CPUs        string
	Memory      string
	Env         []string
	WorkingDir  string
	StoragePath string
	Name        string
	MaxRestarts int32
	GracePeriod time.Duration
	HangTimeout time.Duration
	PGTimeout   time.Duration
	Resize      time.Duration
	Keep        int32
	Score       string
	ScoreOrder  string
	Sync        SyncFlags

	fs *pflag.FlagSet
}

// flagFields maps a field path to the flag that sets it, for error messages.
var flagFields = map[string]string{
	"metadata.name":                      "--name",
	"spec.workers":                       "--workers",
	"spec.minWorkers":                    "--workers",
	"spec.procsPerWorker":                "--procs-per-worker",
	"spec.resources.gpu":                 "--gpus-per-worker",
	"spec.resources.cpu":                 "--cpus-per-worker",
	"spec.resources.memory":              "--memory-per-worker",
	"spec.workingDir":                    "--workdir",
	"spec.storagePath":                   "--storage-path",
	"spec.maxRestarts":                   "--max-restarts",
	"spec.terminationGracePeriodSeconds": "--grace-period",
	"spec.hangTimeoutSeconds":            "--hang-timeout",
	"spec.resizeIntervalSeconds":         "--resize-interval",
	"spec.processGroupTimeoutSeconds":    "--pg-timeout",
	"spec.checkpoints.keep":              "--keep-checkpoints",
	"spec.checkpoints.scoreMetric":       "--checkpoint-score",
	"spec.checkpoints.scoreOrder":        "--score-order",
	"spec.command":                       "the command after --",
	"spec.source.git":                    "--sync-source",
}

// Bind registers the flags on fs.
func (f *Flags) Bind(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVarP(&f.File, "file", "f", "", "read the job from this YAML file (flags given too override it); numbers and true/false in its command, args and env values are taken as their text, as args: [--epochs, 3]")
	f.Workers = Workers{Max: 1}
	fs.Var(&f.Workers, "workers", "number of workers in the gang; MIN:MAX for an elastic gang: it may run with as few as MIN workers (with --kube: as many as Kueue admits through --queue, and fewer for workers the cluster cannot place)")
	// Defaults that depend on other flags are said in the text, and the flag's own
	// default is the zero value, which pflag does not print again.
	fs.Int32Var(&f.Procs, "procs-per-worker", 0, "processes per worker (default: the worker's GPU count, or 1)")
	fs.Int32Var(&f.GPUs, "gpus-per-worker", 0, "GPUs for each worker")
	fs.Int32Var(&f.GPUs, "gpus", 0, "GPUs for each worker: Arena's spelling of --gpus-per-worker")
	fs.StringVar(&f.CPUs, "cpus-per-worker", "", "CPU cores for each worker, e.g. 4 or 500m")
	fs.StringVar(&f.Memory, "memory-per-worker", "", "memory for each worker, e.g. 8Gi")
	fs.StringArrayVarP(&f.Env, "env", "e", nil, "set KEY=VALUE in every worker (repeatable; wins over Trainyard's variables)")
	fs.StringVar(&f.WorkingDir, "workdir", "", "folder the workers start in, on the machine that runs them (default: the current folder)")
	fs.StringVar(&f.StoragePath, "storage-path", "", "folder that holds runs (default "+DefaultStoragePath+"), or a bucket: s3://bucket/prefix (AWS_* credentials and endpoint; docs/storage.md)")
	fs.StringVar(&f.Name, "name", "", "the job's name, which names its run folder under the storage path; "+
		"1 to 45 of a-z, 0-9 and '-', starting with a letter (default: generated)")
	fs.Int32Var(&f.MaxRestarts, "max-restarts", 0, "restart the whole gang up to this many times after a failure")
	fs.DurationVar(&f.GracePeriod, "grace-period", 30*time.Second, "time a worker has to exit after SIGTERM before SIGKILL, and to save a checkpoint when the job is preempted")
	fs.DurationVar(&f.HangTimeout, "hang-timeout", 0, "restart the gang when no rank prints or reports for this long, e.g. 10m (default off)")
	fs.DurationVar(&f.Resize, "resize-interval", v1.DefaultResizeInterval, "how long the job server's grow of an elastic gang (--workers MIN:MAX) waits for the next committed checkpoint; "+
		"then the ranks get the preemption notice and the gang resizes from its latest checkpoint, redoing the steps since. 0 resizes at once")
	fs.DurationVar(&f.PGTimeout, "pg-timeout", 300*time.Second, "timeout of torch.distributed collectives set up by trainyard.init_process_group()")
	fs.Int32Var(&f.Keep, "keep-checkpoints", 0, "keep this many checkpoints (the latest always stays); 0 keeps all")
	fs.StringVar(&f.Score, "checkpoint-score", "", "keep the best checkpoints by this reported metric instead of the newest")
	fs.StringVar(&f.ScoreOrder, "score-order", "", "max (higher is better, the default) or min, for --checkpoint-score")
	f.Sync.bind(fs)
}

// Job builds the job from the file (if any), the flags the user set, and the command
// (everything after the flags). It does not default or validate.
func (f *Flags) Job(command []string) (*v1.TrainJob, error) {
	job := &v1.TrainJob{}
	if f.File != "" {
		var err error
		if job, err = Load(f.File); err != nil {
			return nil, err
		}
	}
	if len(command) > 0 {
		job.Spec.Command, job.Spec.Args = command, nil
	}
	if err := f.apply(job); err != nil {
		return nil, err
	}
	return job, nil
}

func (f *Flags) changed(name string) bool { return f.fs != nil && f.fs.Changed(name) }

func (f *Flags) apply(job *v1.TrainJob) error {
	s := &job.Spec
	if f.changed("workers") {
		s.Workers, s.MinWorkers = ptr(f.Workers.Max), nil
		if f.Workers.Min > 0 {
			s.MinWorkers = ptr(f.Workers.Min)
		}
	}
	if f.changed("procs-per-worker") {
		s.ProcsPerWorker = ptr(f.Procs)
	}
	if f.changed("gpus-per-worker") || f.changed("gpus") {
		s.Resources.GPU = f.GPUs
	}
	if f.changed("max-restarts") {
		s.MaxRestarts = f.MaxRestarts
	}
	if f.changed("grace-period") {
		s.TerminationGracePeriodSeconds = ptr(int64(math.Ceil(f.GracePeriod.Seconds())))
	}
	if f.changed("hang-timeout") {
		s.HangTimeoutSeconds = int64(math.Ceil(f.HangTimeout.Seconds()))
	}
	if f.changed("resize-interval") {
		if f.Resize < 0 || f.Resize > MaxResizeInterval {
			return fmt.Errorf("--resize-interval %s: give a duration from 0 (resize at once) to %s, e.g. 10m", f.Resize, MaxResizeInterval)
		}
		s.ResizeIntervalSeconds = ptr(int64(math.Ceil(f.Resize.Seconds())))
	}
	if f.changed("pg-timeout") {
		s.ProcessGroupTimeoutSeconds = ptr(int64(math.Ceil(f.PGTimeout.Seconds())))
	}
	if f.changed("keep-checkpoints") {
		s.Checkpoints.Keep = f.Keep
	}
	if f.Score != "" {
		s.Checkpoints.ScoreMetric = f.Score
	}
	if f.ScoreOrder != "" {
		s.Checkpoints.ScoreOrder = f.ScoreOrder
	}
	if f.WorkingDir != "" {
		s.WorkingDir = f.WorkingDir
	}
	if f.StoragePath != "" {
		s.StoragePath = f.StoragePath
	}
	if f.changed("name") {
		if f.Name == "" {
			return errors.New(`--name "": ` + NameRule + "; leave --name out for a generated name")
		}
		job.Name, s.RunName = f.Name, ""
	}
	if err := f.applyQuantities(s); err != nil {
		return err
	}
	if err := f.Sync.apply(s); err != nil {
		return err
	}
	return f.applyEnv(s)
}

func (f *Flags) applyQuantities(s *v1.TrainJobSpec) error {
	for _, q := range []struct {
		flag, value string
		dst         **resource.Quantity
	}{{"--cpus-per-worker", f.CPUs, &s.Resources.CPU}, {"--memory-per-worker", f.Memory, &s.Resources.Memory}} {
		if q.value == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.value)
		if err != nil {
			return fmt.Errorf("%s %q: not a quantity (examples: 4, 500m, 8Gi)", q.flag, q.value)
		}
		*q.dst = &v
	}
	return nil
}

// applyEnv merges KEY=VALUE flags into the job's env; a flag replaces a file's variable of
// the same name.
func (f *Flags) applyEnv(s *v1.TrainJobSpec) error {
	for _, kv := range f.Env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return fmt.Errorf("--env %q: must be KEY=VALUE", kv)
		}
		replaced := false
		for i := range s.Env {
			if s.Env[i].Name == name {
				s.Env[i].Value, replaced = value, true
			}
		}
		if !replaced {
			s.Env = append(s.Env, v1.EnvVar{Name: name, Value: value})
		}
	}
	return nil
}

// Resolve is the whole path from flags to a job ready to run: build, default, validate.
// Validation errors name the flag that sets the field.
func (f *Flags) Resolve(command []string, env Env) (*v1.TrainJob, error) {
	job, err := f.Job(command)
	if err != nil {
		return nil, err
	}
	if err := Default(job, env); err != nil {
		return nil, err
	}
	if err := Validate(job); err != nil {
		var inv *Invalid
		if errors.As(err, &inv) && f.File == "" {
			inv.Flags = flagFields
		}
		return nil, err
	}
	return job, nil
}
