package podworker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/workload"
)

// Config is one worker of the gang, as the pod's environment describes it.
type Config struct {
	// Job is the TrainJob, defaulted and validated.
	Job *v1.TrainJob
	// Attempt is the number of the attempt that made the pod, 1-based; the gang may go on
	// to later ones in place.
	Attempt int
	// Worker is the worker's index, 0 .. workers-1; -1 when the environment did not say.
	Worker int
	// MasterAddr and MasterPort are worker 0's address and rendezvous port.
	MasterAddr string
	MasterPort int
	// ProgressAddr is where worker 0 serves its progress to the operator.
	ProgressAddr string
	// GangAddr is where worker 0's gang coordinator listens (its port on every address),
	// and where the workers connect to it. "": MasterAddr, port workload.GangPort.
	GangAddr string
	// GangSecret, when set, authenticates the gang's messages.
	GangSecret []byte
	// Dropped are the workers the gang went on without in place before these pods'
	// worker 0 started (a replaced worker 0's coordinator does not wait for them).
	Dropped []int
	// Restarts and Disruptions are the run's restarts (all, and those that were
	// disruptions) when the operator made the pod.
	Restarts, Disruptions int
	// MilliCPU is the worker container's CPU request in millicores; 0: none (the
	// processes share the node's cores).
	MilliCPU int64
}

// gangAddr is GangAddr or its default.
func (c Config) gangAddr() string {
	if c.GangAddr != "" {
		return c.GangAddr
	}
	return net.JoinHostPort(c.MasterAddr, strconv.Itoa(workload.GangPort))
}

// EnvError is a variable of the pod's environment that is missing or wrong.
type EnvError struct {
	Var string
	Err error
}

// Error names the variable: "TRAINYARD_ATTEMPT: must be a whole number of at least 1, got "x"".
func (e *EnvError) Error() string { return e.Var + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *EnvError) Unwrap() error { return e.Err }

// ParseEnv reads the worker's Config from the environment through lookup (os.LookupEnv in
// a pod). Every variable is checked; the error joins one *EnvError per bad variable. The
// returned Config holds what could be read (Worker is -1 when the index could not).
func ParseEnv(lookup func(string) (string, bool)) (Config, error) {
	cfg := Config{Worker: -1}
	var errs []error
	bad := func(name string, err error) { errs = append(errs, &EnvError{Var: name, Err: err}) }

	job, err := parseJob(lookup)
	if err != nil {
		bad(workload.EnvJob, err)
	}
	cfg.Job = job
	if cfg.Attempt, err = intVar(lookup, workload.EnvAttempt, 1, 1<<30); err != nil {
		bad(workload.EnvAttempt, err)
	}
	maxWorker := jobspec.MaxWorkers - 1
	if job != nil {
		maxWorker = job.Spec.WorkerCount() - 1
	}
	if w, err := intVar(lookup, workload.EnvWorker, 0, maxWorker); err != nil {
		bad(workload.EnvWorker, err)
	} else {
		cfg.Worker = w
	}
	if cfg.MasterAddr, err = stringVar(lookup, workload.EnvMasterAddr); err != nil {
		bad(workload.EnvMasterAddr, err)
	}
	if cfg.MasterPort, err = intVar(lookup, workload.EnvMasterPort, 1, 65535); err != nil {
		bad(workload.EnvMasterPort, err)
	}
	cfg.ProgressAddr = ":" + strconv.Itoa(workload.ProgressPort)
	if addr, ok := lookup(workload.EnvProgressAddr); ok && addr != "" {
		cfg.ProgressAddr = addr
	}
	if addr, ok := lookup(workload.EnvGangAddr); ok && addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(workload.EnvGangAddr, fmt.Errorf("must be host:port: %w", err))
		}
		cfg.GangAddr = addr
	}
	if secret, ok := lookup(workload.EnvGangSecret); ok && secret != "" {
		cfg.GangSecret = []byte(secret)
	}
	if v, ok := lookup(workload.EnvMilliCPU); ok && v != "" {
		milli, err := intVar(lookup, workload.EnvMilliCPU, 0, 1<<30)
		if err != nil {
			bad(workload.EnvMilliCPU, err)
		}
		cfg.MilliCPU = int64(milli)
	}
	if v, ok := lookup(workload.EnvDroppedWorkers); ok && v != "" {
		if cfg.Dropped, err = droppedVar(v, maxWorker); err != nil {
			bad(workload.EnvDroppedWorkers, err)
		}
	}
	for _, v := range []struct {
		name string
		n    *int
	}{{workload.EnvRestarts, &cfg.Restarts}, {workload.EnvDisruptions, &cfg.Disruptions}} {
		if _, ok := lookup(v.name); !ok {
			continue
		}
		if *v.n, err = intVar(lookup, v.name, 0, 1<<30); err != nil {
			bad(v.name, err)
		}
	}
	return cfg, errors.Join(errs...)
}

// droppedVar reads a list of worker indexes from 1 to most: "2,3".
func droppedVar(v string, most int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 1 || w > most {
			return nil, fmt.Errorf("%q: give worker indexes from 1 to %d, separated by commas", v, most)
		}
		out = append(out, w)
	}
	return out, nil
}

// parseJob decodes, defaults and validates the TrainJob. The run name and the storage
// path must be set: defaults made in each pod would differ between the gang's workers.
func parseJob(lookup func(string) (string, bool)) (*v1.TrainJob, error) {
	data, err := stringVar(lookup, workload.EnvJob)
	if err != nil {
		return nil, err
	}
	job, err := jobspec.Parse([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("not a TrainJob: %w", err)
	}
	var missing []string
	if job.Spec.RunName == "" {
		missing = append(missing, "spec.runName")
	}
	if job.Spec.StoragePath == "" {
		missing = append(missing, "spec.storagePath")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s not set; the operator sets them so that every worker of the gang uses the same run folder",
			strings.Join(missing, " and "))
	}
	home := os.Getenv("HOME")
	if home == "" {
		home = "/"
	}
	if err := jobspec.Default(job, jobspec.Env{Home: home}); err != nil {
		return nil, err
	}
	if err := jobspec.Validate(job); err != nil {
		return nil, err
	}
	return job, nil
}

func stringVar(lookup func(string) (string, bool), name string) (string, error) {
	v, ok := lookup(name)
	switch {
	case !ok:
		return "", errors.New("not set (trainyard worker runs in a pod that the Trainyard operator made)")
	case strings.TrimSpace(v) == "":
		return "", errors.New("empty")
	}
	return v, nil
}

func intVar(lookup func(string) (string, bool), name string, lo, hi int) (int, error) {
	v, err := stringVar(lookup, name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("must be a whole number from %d to %d, got %q", lo, hi, v)
	}
	return n, nil
}
