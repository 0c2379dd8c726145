// Package workload renders what the Kubernetes operator creates for one attempt of a
// TrainJob (a headless Service and one pod per worker) and holds the contract between
// the operator and the in-pod launcher (`trainyard worker`): labels, paths, variables and
// the summary a worker leaves in its termination message.
package workload

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Labels and annotations on everything the operator creates.
const (
	// LabelJob names the TrainJob an object belongs to.
	LabelJob = "trainyard.dev/job-name"
	// LabelJobUID is the TrainJob's UID: a TrainJob made again under the same name does
	// not adopt what its predecessor left.
	LabelJobUID = "trainyard.dev/job-uid"
	// LabelAttempt is the attempt number (1-based) an object belongs to.
	LabelAttempt = "trainyard.dev/attempt"
	// LabelManagedBy marks objects made by the operator, with value ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "trainyard"
	// LabelQueue is Kueue's label naming the local queue of a job; on a TrainJob it does what
	// spec.kubernetes.queueName does.
	LabelQueue = "kueue.x-k8s.io/queue-name"
	// LabelWorkerIndex is a worker pod's index in its gang (0 is worker 0).
	LabelWorkerIndex = "trainyard.dev/worker-index"
	// LabelCompletionIndex is the label the Job controller puts on an Indexed Job's pods,
	// where earlier operators (which made Indexed Jobs) kept the index; read when LabelWorkerIndex is absent.
	LabelCompletionIndex = "batch.kubernetes.io/job-completion-index"
)

// Names and paths inside a worker pod.
const (
	// WorkerContainer is the name of the container that runs the user's command.
	WorkerContainer = "worker"
	// InitContainer copies the trainyard binary into BinDir.
	InitContainer = "trainyard-init"
	// BinDir is the emptyDir the init container copies the binary into.
	BinDir = "/trainyard/bin"
	// BinPath is the worker container's entrypoint.
	BinPath = BinDir + "/trainyard"
	// DefaultStoragePath is the storage path of a TrainJob that names none. Without a
	// volume mounted there it is an emptyDir, and checkpoints do not survive a restart.
	DefaultStoragePath = "/trainyard/results"
	// MasterPort is the rendezvous port on worker 0.
	MasterPort = 29500
	// ProgressPort and ProgressPath are where worker 0 serves its Summary while the
	// attempt runs (container port "progress").
	ProgressPort = 29501
	ProgressPath = "/progress"
	// GangPort is where worker 0's launcher coordinates the gang's attempts with every
	// worker's (internal/gang): restarts in place (container port "gang").
	GangPort = 29502
	// GPUsPath is where every worker serves what its GPUs do now (WorkerGPUs), on
	// ProgressPort, for `top job --kube` and the dashboard (through the API server's
	// pod proxy).
	GPUsPath = "/gpus"
	// TerminationLog is where a worker writes its Summary.
	TerminationLog = "/dev/termination-log"
	// TerminationLogMax is the most the kubelet keeps of a termination message.
	TerminationLogMax = 4096
)

// Variables the operator sets in the worker container.
const (
	// EnvJob holds the TrainJob, defaulted, as JSON.
	EnvJob = "TRAINYARD_JOB"
	// EnvAttempt is the attempt number, 1-based.
	EnvAttempt = "TRAINYARD_ATTEMPT"
	// EnvWorker is the worker's index, named as an Indexed Job's pods name it (Kubeflow's
	// and Arena's scripts read it).
	EnvWorker = "JOB_COMPLETION_INDEX"
	// EnvProgressAddr overrides the address worker 0 serves progress on (tests).
	EnvProgressAddr = "TRAINYARD_PROGRESS_ADDR"
	// EnvMasterAddr and EnvMasterPort say where worker 0 listens.
	EnvMasterAddr = "MASTER_ADDR"
	EnvMasterPort = "MASTER_PORT"
	// EnvRestarts and EnvDisruptions are the TrainJob's status.restarts and
	// status.disruptions when the operator made the attempt's pods (unset: 0), from which
	// the gang counts its restarts in place against maxRestarts and maxDisruptions.
	EnvRestarts    = "TRAINYARD_RESTARTS"
	EnvDisruptions = "TRAINYARD_DISRUPTIONS"
	// EnvDroppedWorkers lists the workers the gang went on without in place
	// (status.droppedWorkers: "2,3"), in the pods made since: a replaced worker 0's
	// coordinator does not wait for them.
	EnvDroppedWorkers = "TRAINYARD_DROPPED_WORKERS"
	// EnvGangAddr overrides the address of worker 0's gang coordinator,
	// MASTER_ADDR:GangPort (tests); worker 0 listens on its port.
	EnvGangAddr = "TRAINYARD_GANG_ADDR"
	// EnvGangSecret, when set (the same in every pod of the gang), authenticates the gang's
	// messages with an HMAC.
	EnvGangSecret = "TRAINYARD_GANG_SECRET"
	// EnvMilliCPU is the worker container's CPU request in millicores (the downward API's
	// requests.cpu; 0 without one), which the worker's processes share as their
	// OMP_NUM_THREADS instead of the node's cores.
	EnvMilliCPU = "TRAINYARD_WORKER_MILLICPU"
	// EnvMinWorkers and EnvMaxWorkers are an elastic gang's fewest and most workers
	// (spec.minWorkers, spec.workers), set while it runs with fewer than its most: the job
	// the pods get then says only the gang's size. The ranks inherit them (the launcher's
	// names, launcher.EnvMinWorkers and launcher.EnvMaxWorkers).
	EnvMinWorkers = "TRAINYARD_MIN_WORKERS"
	EnvMaxWorkers = "TRAINYARD_MAX_WORKERS"
)

// Outcomes of a Summary that worker 0 serves while the gang runs.
const (
	// OutcomeRunning: an attempt runs.
	OutcomeRunning = "running"
	// OutcomeRestarting: the gang restarts in place (its processes stop, or it waits for
	// the next attempt's workers); the Reason says why.
	OutcomeRestarting = "restarting"
)

// Summary is what a worker leaves in its termination message when it exits, read by the
// operator for the TrainJob's status. Worker 0's carries the run's progress, and the
// gang's attempt and restarts.
type Summary struct {
	Worker     int               `json:"worker"`
	Outcome    string            `json:"outcome"` // succeeded, failed, interrupted
	Reason     string            `json:"reason,omitempty"`
	Iteration  int64             `json:"iteration,omitempty"`
	Metrics    map[string]string `json:"metrics,omitempty"`
	Checkpoint string            `json:"checkpoint,omitempty"`
	RunDir     string            `json:"runDir,omitempty"`
	// Attempt is the run's attempt the gang is in, or ended in; the gang may have moved
	// past the attempt that made its pods by restarting in place.
	Attempt int `json:"attempt,omitempty"`
	// Restarts and Disruptions are the run's restarts so far, as the status counts them:
	// those before the pods were made (EnvRestarts, EnvDisruptions) and those made in
	// place since (InPlace of them).
	Restarts    int32 `json:"restarts,omitempty"`
	Disruptions int32 `json:"disruptions,omitempty"`
	InPlace     int32 `json:"inPlace,omitempty"`
	// LastRestart says why the gang last restarted in place: "attempt 3 restarted in
	// place after rank 5 (worker 2, pid 4242) exited with code 1".
	LastRestart string `json:"lastRestart,omitempty"`
	// Dropped are the worker indices the gang went on without, in place (DropRequest),
	// and Resized says why it last did.
	Dropped []int  `json:"dropped,omitempty"`
	Resized string `json:"resized,omitempty"`
	// Growing, while the outcome is restarting, says that the gang restarts to grow (a
	// resize), not after a failure.
	Growing bool `json:"growing,omitempty"`
	// Final, in a failed worker's summary, says that the gang failed for good (no
	// restarts left in place), as the reason of the TrainJob's Failed condition
	// (WorkerFailed, TooManyDisruptions): the operator must not restart it.
	Final string `json:"final,omitempty"`
}

// Encode returns the summary as JSON of at most TerminationLogMax bytes, dropping the
// metrics, then shortening the last restart's reason to 512 bytes, then the reason, when
// it is longer.
func (s Summary) Encode() []byte {
	data, _ := json.Marshal(s)
	if len(data) <= TerminationLogMax {
		return data
	}
	s.Metrics = nil
	if len(s.LastRestart) > 512 {
		s.LastRestart = s.LastRestart[:509] + "..."
	}
	data, _ = json.Marshal(s)
	if over := len(data) - TerminationLogMax; over > 0 && over < len(s.Reason) {
		s.Reason = s.Reason[:len(s.Reason)-over-3] + "..."
		data, _ = json.Marshal(s)
	}
	return data
}

// DecodeSummary reads a termination message written by Encode.
func DecodeSummary(msg string) (Summary, error) {
	var s Summary
	if err := json.Unmarshal([]byte(msg), &s); err != nil {
		return Summary{}, fmt.Errorf("read worker summary: %w", err)
	}
	return s, nil
}

// AttemptName is the name of an attempt's headless Service: "<job>-a<N>".
func AttemptName(job string, attempt int) string {
	return job + "-a" + strconv.Itoa(attempt)
}

// MasterAddr is worker 0's stable DNS name within the namespace: its pod's host name
// under the attempt's headless Service.
func MasterAddr(job string, attempt int) string {
	name := AttemptName(job, attempt)
	return name + "-0." + name
}

// WorkerGPUs is what a worker's GPUs do now, as NVML (nvidia-smi) in its pod says.
type WorkerGPUs struct {
	Worker int         `json:"worker"`
	GPUs   []GPUSample `json:"gpus"`
	// Error says why the GPUs could not be read, when they could not.
	Error string `json:"error,omitempty"`
}

// GPUSample is one GPU's use.
type GPUSample struct {
	// Index is the GPU's index in the pod.
	Index              int    `json:"index"`
	UUID               string `json:"uuid,omitempty"`
	Name               string `json:"name,omitempty"`
	UtilizationPercent int    `json:"utilizationPercent"`
	MemoryUsedBytes    int64  `json:"memoryUsedBytes"`
	MemoryTotalBytes   int64  `json:"memoryTotalBytes"`
}

// WorkerIndex is a worker pod's index in its gang (LabelWorkerIndex, or an earlier
// operator's Indexed Job's completion index), or -1 when it has none.
func WorkerIndex(labels map[string]string) int {
	v, ok := labels[LabelWorkerIndex]
	if !ok {
		v, ok = labels[LabelCompletionIndex]
	}
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return i
}
