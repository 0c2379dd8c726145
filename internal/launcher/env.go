package launcher

import (
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/device"
	"github.com/trainyard/trainyard/internal/secrets"
)

// Proc identifies one process of an attempt. Its local rank, node and the GPUs it sees are
// torchrun's: they count machines, not workers (see Placement.NodePerWorker).
type Proc struct {
	Attempt int // 1-based
	Worker  int // TRAINYARD_WORKER
	// LocalRank is the process's index among the gang's processes on this machine
	// (LOCAL_RANK), in worker order.
	LocalRank  int
	Rank       int
	MasterAddr string
	MasterPort int
	// GPUs are the GPUs the process sees (CUDA_VISIBLE_DEVICES): those of all the gang's
	// workers on this machine, in worker order, so that with one GPU per process
	// cuda:LOCAL_RANK is its own, as under torchrun and Ray.
	GPUs []device.GPU
	// WorkerGPUs are the GPUs reserved for the process's worker: what the attempt's record
	// says it uses (run.json; `get` and `top` show it).
	WorkerGPUs []device.GPU
	// Device is the index in GPUs of the process's own GPU (TRAINYARD_CUDA_DEVICE, which
	// the helper's get_device uses); unused without GPUs.
	Device int
	// HostProcs is the number of the gang's processes on this machine (LOCAL_WORLD_SIZE),
	// which share its cores.
	HostProcs int
	// HostMilliCPU is the CPU those processes have here, in millicores (Placement.MilliCPU);
	// 0: this machine's cores.
	HostMilliCPU int64
	// Node is this machine's index among the gang's machines (NODE_RANK, GROUP_RANK), and
	// Nodes their number (GROUP_WORLD_SIZE; 0 counts as 1).
	Node, Nodes int
}

// RankOf returns the global rank of a worker's local process.
func RankOf(job *v1.TrainJob, worker, localRank int) int {
	return worker*job.Spec.ProcCount() + localRank
}

// Env returns the environment of one worker process: the inherited environment, then the
// variables torch.distributed and torchrun users expect, then Trainyard's own and the GPU
// reservation, then the job's env, which wins over all of them. extra holds more
// variables from the caller (it loses to the job's env too). PYTHONPATH is the exception:
// the caller's (which holds the in-job helper) is appended to the job's or the inherited
// one, so that the helper stays importable and the user's modules still come first.
func Env(job *v1.TrainJob, p Proc, runDir string, inherited []string, extra map[string]string) []string {
	vars := parseEnv(inherited)
	userPath := vars["PYTHONPATH"]
	maps.Copy(vars, TorchEnv(job, p))
	maps.Copy(vars, trainyardEnv(job, p, runDir))
	maps.Copy(vars, device.Env(p.GPUs))
	maps.Copy(vars, extra)
	for _, e := range job.Spec.Env {
		vars[e.Name] = e.Value
		if e.Name == "PYTHONPATH" {
			userPath = e.Value
		}
	}
	if helper, ok := extra["PYTHONPATH"]; ok {
		vars["PYTHONPATH"] = joinPath(userPath, helper)
	}
	for k := range vars { // the clone's credentials, and where the job's secrets were, stay with trainyard
		if secrets.CloneOnly(k) || k == secrets.EnvFile {
			delete(vars, k)
		}
	}
	keys := slices.Sorted(maps.Keys(vars))
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + vars[k]
	}
	return out
}

// TorchEnv returns the variables torchrun sets for a process.
func TorchEnv(job *v1.TrainJob, p Proc) map[string]string {
	s := &job.Spec
	itoa := strconv.Itoa
	return map[string]string{
		"MASTER_ADDR":                p.MasterAddr,
		"MASTER_PORT":                itoa(p.MasterPort),
		"WORLD_SIZE":                 itoa(s.WorldSize()),
		"RANK":                       itoa(p.Rank),
		"LOCAL_RANK":                 itoa(p.LocalRank),
		"LOCAL_WORLD_SIZE":           itoa(max(1, p.HostProcs)),
		"GROUP_RANK":                 itoa(p.Node),
		"NODE_RANK":                  itoa(p.Node),
		"GROUP_WORLD_SIZE":           itoa(max(1, p.Nodes)),
		"ROLE_NAME":                  "default",
		"ROLE_RANK":                  itoa(p.Rank),
		"ROLE_WORLD_SIZE":            itoa(s.WorldSize()),
		"TORCHELASTIC_RUN_ID":        s.RunName,
		"TORCHELASTIC_RESTART_COUNT": itoa(p.Attempt - 1),
		"TORCHELASTIC_MAX_RESTARTS":  itoa(int(s.MaxRestarts)),
		"PYTHONUNBUFFERED":           "1",
		"OMP_NUM_THREADS":            itoa(ompThreads(job, hostCores(p), p.HostProcs)),
	}
}

func trainyardEnv(job *v1.TrainJob, p Proc, runDir string) map[string]string {
	s := &job.Spec
	env := map[string]string{
		"TRAINYARD_RUN_NAME":     s.RunName,
		"TRAINYARD_STORAGE_PATH": s.StoragePath,
		"TRAINYARD_RUN_DIR":      runDir,
		"TRAINYARD_ATTEMPT":      strconv.Itoa(p.Attempt),
		"TRAINYARD_MAX_RESTARTS": strconv.Itoa(int(s.MaxRestarts)),
		"TRAINYARD_WORKER":       strconv.Itoa(p.Worker),
		// The checkpoints the run keeps (0: all), for Ray's CheckpointConfig to compare.
		"TRAINYARD_KEEP_CHECKPOINTS": strconv.Itoa(int(s.Checkpoints.Keep)),
	}
	if len(p.GPUs) > 0 {
		env["TRAINYARD_CUDA_DEVICE"] = strconv.Itoa(p.Device)
	}
	return env
}

// hostCores is the whole cores a process's host gives the gang's processes there: its
// CPU request on Kubernetes (at least 1), else this machine's cores.
func hostCores(p Proc) int {
	if p.HostMilliCPU > 0 {
		return max(1, int(p.HostMilliCPU/1000))
	}
	return runtime.NumCPU()
}

// ompThreads shares a worker's CPUs among its processes: the job's cpu request if set,
// else the host's cores (hostCores) shared among the gang's processes on it. Never below 1.
func ompThreads(job *v1.TrainJob, cores, hostProcs int) int {
	s := &job.Spec
	if cpu := s.Resources.CPU; cpu != nil {
		return max(1, int(cpu.MilliValue()/1000)/s.ProcCount())
	}
	return max(1, cores/max(1, hostProcs))
}

func joinPath(first, second string) string {
	switch {
	case first == "":
		return second
	case second == "":
		return first
	}
	return first + ":" + second
}

func parseEnv(env []string) map[string]string {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	return vars
}
