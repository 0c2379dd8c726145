package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrainJob is a distributed training job: a gang of identical workers, each running
// ProcsPerWorker processes of the same command, all started together and restarted together.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type TrainJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TrainJobSpec   `json:"spec"`
	Status TrainJobStatus `json:"status,omitempty"`
}

// TrainJobSpec is what the user asks for. Zero values are replaced by defaults
// (see internal/jobspec.Default).
type TrainJobSpec struct {
	// Workers is the number of workers in the gang (torchrun's nodes). Default 1.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Workers *int32 `json:"workers,omitempty"`

	// ProcsPerWorker is the number of processes each worker starts (torchrun's
	// --nproc-per-node). Default 1, or the worker's GPU count when it has GPUs.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProcsPerWorker *int32 `json:"procsPerWorker,omitempty"`

	// Resources is what each worker needs.
	Resources WorkerResources `json:"resources,omitempty"`

	// Command is the program each process runs, with its leading arguments.
	// +kubebuilder:validation:MinItems=1
	Command []string `json:"command"`

	// Args are appended to Command.
	Args []string `json:"args,omitempty"`

	// Env is set in every process; it wins over the variables Trainyard sets.
	Env []EnvVar `json:"env,omitempty"`

	// WorkingDir is the folder the processes start in. Default: where trainyard was started.
	WorkingDir string `json:"workingDir,omitempty"`

	// StoragePath is the folder that holds runs. Default ~/trainyard_results.
	StoragePath string `json:"storagePath,omitempty"`

	// RunName names the run's folder under StoragePath. Default: metadata.name, or a
	// generated name.
	RunName string `json:"runName,omitempty"`

	// MaxRestarts is how many times the whole gang is started again after a failure.
	// +kubebuilder:validation:Minimum=0
	MaxRestarts int32 `json:"maxRestarts,omitempty"`

	// HangTimeoutSeconds treats the gang as failed (and restarts it) when no rank prints or
	// reports anything for this long. 0, the default, never does.
	// +kubebuilder:validation:Minimum=0
	// +optional
	HangTimeoutSeconds int64 `json:"hangTimeoutSeconds,omitempty"`

	// ProcessGroupTimeoutSeconds is the timeout the helper's init_process_group gives
	// torch.distributed, so a frozen peer fails a collective in minutes. Default 300.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProcessGroupTimeoutSeconds *int64 `json:"processGroupTimeoutSeconds,omitempty"`

	// Checkpoints says which committed checkpoints to keep.
	// +optional
	Checkpoints CheckpointPolicy `json:"checkpoints,omitempty"`

	// TerminationGracePeriodSeconds is how long a process has to exit after SIGTERM
	// before it is killed. Default 5.
	// +kubebuilder:validation:Minimum=0
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// WorkerResources is what one worker needs.
type WorkerResources struct {
	// CPU is the number of cores for the worker, e.g. "4" or "500m".
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// Memory is the worker's memory, e.g. "8Gi".
	Memory *resource.Quantity `json:"memory,omitempty"`

	// GPU is the number of whole NVIDIA GPUs the worker gets.
	// +kubebuilder:validation:Minimum=0
	GPU int32 `json:"gpu,omitempty"`
}

// CheckpointPolicy says which committed checkpoints to keep. The latest is always kept,
// since a resume needs it.
type CheckpointPolicy struct {
	// Keep is how many checkpoints to keep; 0, the default, keeps all.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Keep int32 `json:"keep,omitempty"`

	// ScoreMetric keeps the best Keep checkpoints by this reported metric instead of the
	// most recent ones.
	// +optional
	ScoreMetric string `json:"scoreMetric,omitempty"`

	// ScoreOrder is "max" (higher is better, the default) or "min".
	// +kubebuilder:validation:Enum=max;min
	// +optional
	ScoreOrder string `json:"scoreOrder,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	// Name of the variable.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Value of the variable; may be empty.
	Value string `json:"value,omitempty"`
}

// TrainJobStatus is what Trainyard observed of the job.
type TrainJobStatus struct {
	// Phase is a one-word summary of where the job is.
	Phase JobPhase `json:"phase,omitempty"`

	// Attempt is the number of the current or last attempt, starting at 1.
	Attempt int32 `json:"attempt,omitempty"`

	// Restarts is how many times the gang was started again.
	Restarts int32 `json:"restarts,omitempty"`

	// Reason says why the job is in its phase, in a sentence.
	Reason string `json:"reason,omitempty"`

	// StartTime is when the first attempt started.
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job succeeded or failed for good.
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// JobPhase is a one-word summary of a job's state.
type JobPhase string

// The phases a job goes through.
const (
	PhasePending     JobPhase = "Pending"
	PhaseRunning     JobPhase = "Running"
	PhaseRestarting  JobPhase = "Restarting"
	PhaseSucceeded   JobPhase = "Succeeded"
	PhaseFailed      JobPhase = "Failed"
	PhaseInterrupted JobPhase = "Interrupted"
)

// Finished reports whether the phase is final.
func (p JobPhase) Finished() bool {
	return p == PhaseSucceeded || p == PhaseFailed
}

// TrainJobList is a list of TrainJobs.
//
// +kubebuilder:object:root=true
type TrainJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainJob `json:"items"`
}

// WorkerCount returns the number of workers, 1 when unset.
func (s *TrainJobSpec) WorkerCount() int {
	if s.Workers == nil {
		return 1
	}
	return int(*s.Workers)
}

// ProcCount returns the number of processes per worker, 1 when unset.
func (s *TrainJobSpec) ProcCount() int {
	if s.ProcsPerWorker == nil {
		return 1
	}
	return int(*s.ProcsPerWorker)
}

// WorldSize returns the total number of processes in the gang.
func (s *TrainJobSpec) WorldSize() int {
	return s.WorkerCount() * s.ProcCount()
}

// PGTimeout returns the process-group timeout in seconds, 300 when unset.
func (s *TrainJobSpec) PGTimeout() int64 {
	if s.ProcessGroupTimeoutSeconds == nil {
		return 300
	}
	return *s.ProcessGroupTimeoutSeconds
}

// GracePeriod returns the termination grace period in seconds, 5 when unset.
func (s *TrainJobSpec) GracePeriod() int64 {
	if s.TerminationGracePeriodSeconds == nil {
		return 5
	}
	return *s.TerminationGracePeriodSeconds
}
