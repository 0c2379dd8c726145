package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TrainJob is a distributed training job: a gang of identical workers, each running
// ProcsPerWorker processes of the same command, all started together and restarted together.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tj
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.workersReady`
// +kubebuilder:printcolumn:name="Workers",type=integer,JSONPath=`.spec.workers`
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.spec.resources.gpu`
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 45 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be at most 45 characters of lower-case letters, digits and '-', starting with a letter (the workers' host names are built from it)"
// +kubebuilder:validation:XValidation:rule="has(self.spec.kubernetes) && has(self.spec.kubernetes.image) && size(self.spec.kubernetes.image) > 0",message="spec.kubernetes.image is required on Kubernetes: the workers' container image, with the job's command and torch"
type TrainJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TrainJobSpec   `json:"spec"`
	Status TrainJobStatus `json:"status,omitempty"`
}

// TrainJobSpec is what the user asks for. Zero values are replaced by defaults
// (see internal/jobspec.Default).
//
// What the operator's pod policy reads (spec.kubernetes.podTemplate, serviceAccountName
// and volumes, spec.source.git.credentialsSecret) cannot change once the TrainJob exists;
// workers, suspend and the rest may.
// +kubebuilder:validation:XValidation:rule="(has(self.source) && has(self.source.git) && has(self.source.git.credentialsSecret)) == (has(oldSelf.source) && has(oldSelf.source.git) && has(oldSelf.source.git.credentialsSecret)) && (!has(self.source) || !has(self.source.git) || !has(self.source.git.credentialsSecret) || self.source.git.credentialsSecret == oldSelf.source.git.credentialsSecret)",message="spec.source.git.credentialsSecret is immutable: the operator's pod policy checked the Secret when the TrainJob was created; delete the TrainJob and create it again to change it",fieldPath=".source.git.credentialsSecret"
type TrainJobSpec struct {
	// Workers is the number of workers in the gang (torchrun's nodes). Default 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	Workers *int32 `json:"workers,omitempty"`

	// MinWorkers makes the gang elastic: it may run with as few as MinWorkers workers
	// (Workers is then the most). `trainyard run` drops a worker that failed two
	// attempts in a row instead of failing the job, while the gang keeps at least
	// MinWorkers; the resize uses no restart. Default: Workers (not elastic). The job
	// server also starts it with what fits, grows it into free room and shrinks it for
	// jobs of higher priority. On Kubernetes a job admitted by Kueue (the queue-name
	// label) asks Kueue for MinWorkers to Workers workers (the PodSet's minCount, Kueue's
	// partial admission) and runs with what Kueue admits (status.workers); without Kueue
	// the gang starts with Workers. There a gang whose workers cannot be scheduled (a lost
	// node) for the operator's --elastic-settle goes on with fewer, at least MinWorkers,
	// from its latest checkpoint, using no restart; without Kueue it grows back when the
	// lost node returns.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinWorkers *int32 `json:"minWorkers,omitempty"`

	// ResizeIntervalSeconds bounds how long the job server's grow of an elastic gang
	// (MinWorkers) waits for the gang's next committed checkpoint. Past it, the ranks get
	// the preemption notice to save now, then the gang is stopped and started again at the
	// new size from its latest checkpoint (the steps since are redone when they save
	// none). 0 resizes at once, as torchrun and Ray Train do. Default 600 (10 minutes),
	// so that a job checkpointing at least that often never loses a step to a grow. Ranks
	// that do not report through the helper are resized at once whatever it says; a
	// shrink never waits. On Kubernetes it bounds the wait of a gang shrunk for a lost
	// node to grow back once the node is ready again (not in a Kueue queue, where the gang
	// grows at its next admission).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	// +optional
	ResizeIntervalSeconds *int64 `json:"resizeIntervalSeconds,omitempty"`

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

	// MaxDisruptions is how many times the gang is restarted after a disruption (a worker
	// evicted or preempted, its node gone, or the job's Kueue Workload evicted),
	// which do not count against MaxRestarts; one more fails the job (reason
	// TooManyDisruptions). Default DefaultMaxDisruptions (operator only).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxDisruptions *int32 `json:"maxDisruptions,omitempty"`

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

	// Source is where the workers' code comes from, fetched once before they start.
	// +optional
	Source *SourceSpec `json:"source,omitempty"`

	// Kubernetes holds what only the Kubernetes operator uses (the image, scheduling,
	// volumes); `trainyard run` and the job server ignore it.
	// +optional
	Kubernetes *KubernetesSpec `json:"kubernetes,omitempty"`

	// TerminationGracePeriodSeconds is how long a process has to exit after SIGTERM
	// before it is killed, and, when a preemption stops the job, the time its ranks have to
	// save a checkpoint first (the preemption notice). Default 30, as Kubernetes has it.
	// +kubebuilder:validation:Minimum=0
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// Suspend stops the running attempt and starts none while true; setting it back to
	// false starts a new attempt that resumes from the latest checkpoint (operator only).
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// ActiveDeadlineSeconds fails the job when it has run this long since its first
	// attempt started, restarts included (operator only).
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// PreRunningDeadlineSeconds fails the job when an attempt's workers are not all
	// running this long after the attempt was created (or admitted by Kueue): an image that
	// cannot be pulled, pods that cannot be scheduled (operator only). An elastic gang
	// (minWorkers) whose unschedulable workers it could go without shrinks at this
	// deadline instead, if it comes before the operator's elastic settle time.
	// +kubebuilder:validation:Minimum=1
	// +optional
	PreRunningDeadlineSeconds *int64 `json:"preRunningDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished deletes the job's pods, Jobs and Services this long after
	// it finished; the TrainJob and the logs in the storage path stay (operator only).
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int64 `json:"ttlSecondsAfterFinished,omitempty"`
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

// KubernetesSpec is the part of a job that only matters on Kubernetes: how each worker's
// pod is made and scheduled.
//
// What the operator's pod policy reads of it is frozen once the TrainJob exists: the pod
// template and the service account (added, changed or removed), and the volumes once set.
// The rules are a second line: the operator checks every pod it creates against the
// policy, so what they let through (a template whose top-level keys are swapped, since CEL
// compares a schemaless object's values key by key) makes no pod.
// +kubebuilder:validation:XValidation:rule="has(self.podTemplate) == has(oldSelf.podTemplate) && (!has(self.podTemplate) || self.podTemplate == oldSelf.podTemplate)",message="spec.kubernetes.podTemplate is immutable: the operator's pod policy checked the pods it shapes when the TrainJob was created; delete the TrainJob and create it again to change it",fieldPath=".podTemplate"
// +kubebuilder:validation:XValidation:rule="has(self.serviceAccountName) == has(oldSelf.serviceAccountName) && (!has(self.serviceAccountName) || self.serviceAccountName == oldSelf.serviceAccountName)",message="spec.kubernetes.serviceAccountName is immutable: the operator's pod policy checked it when the TrainJob was created; delete the TrainJob and create it again to change it",fieldPath=".serviceAccountName"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.volumes) || has(self.volumes) && self.volumes == oldSelf.volumes",message="spec.kubernetes.volumes is immutable once set: the operator's pod policy checked them when the workers' pods were made; delete the TrainJob and create it again to change them",fieldPath=".volumes"
type KubernetesSpec struct {
	// Image is the container image of the workers; it needs the job's command (and torch),
	// not Trainyard, whose binary an init container brings.
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy is the image's pull policy.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets name the secrets to pull the image with.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// ServiceAccountName is the workers' service account.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// NodeSelector restricts the nodes the workers run on.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations are added to the workers' pods (a toleration for the nvidia.com/gpu taint
	// is added for workers with GPUs).
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity is the workers' pods' affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// PriorityClassName is the workers' pods' priority class.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// SchedulerName is the scheduler of the workers' pods.
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`

	// QueueName admits the whole gang through this Kueue LocalQueue: the operator makes one
	// Kueue Workload for the TrainJob and starts no worker until Kueue admits it. Kueue's
	// label kueue.x-k8s.io/queue-name on the TrainJob does the same.
	// +optional
	QueueName string `json:"queueName,omitempty"`

	// Volumes are added to the workers' pods: a PVC or a CSI volume for the storage path.
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// VolumeMounts are added to the worker container.
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// PodLabels are added to the workers' pods (Trainyard's own labels win).
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// PodAnnotations are added to the workers' pods (a CSI driver such as GCS FUSE reads
	// its settings from them).
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// TensorBoard deploys a TensorBoard Deployment and Service, owned by the TrainJob, that
	// read the job's logs from the same volume as the workers.
	// +optional
	TensorBoard *TensorBoardSpec `json:"tensorboard,omitempty"`

	// PodTemplate is a partial pod template (metadata and spec) merged over the one
	// Trainyard renders, the way kubectl patch merges (containers by name; the worker
	// container is named "worker"): for anything the fields above do not cover.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	PodTemplate *runtime.RawExtension `json:"podTemplate,omitempty"`
}

// SourceSpec is where a job's code comes from.
type SourceSpec struct {
	// Git clones a repository into <workingDir>/code/<repository name> in every worker
	// (Arena's --sync-mode git); locally into the run folder's code/ folder, once per run.
	// +optional
	Git *GitSource `json:"git,omitempty"`
}

// GitSource is a git repository and the commit of it to run.
type GitSource struct {
	// URL of the repository: https://, http:// or file://, without credentials.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`

	// Branch to run; default the repository's default branch.
	// +optional
	Branch string `json:"branch,omitempty"`

	// Revision is the full commit SHA to check out. `trainyard submit` sets it to the
	// branch's tip, so every worker and every restart runs the same commit.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}$`
	// +optional
	Revision string `json:"revision,omitempty"`

	// CredentialsSecret names a Secret of the job's namespace with keys username and
	// password for a private repository (Kubernetes only; `trainyard submit --kube` makes
	// one, owned by the TrainJob, from GIT_SYNC_USERNAME and GIT_SYNC_PASSWORD).
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`
}

// TensorBoardSpec deploys a TensorBoard for the job (Arena's --tensorboard).
type TensorBoardSpec struct {
	// LogDir is the folder TensorBoard reads, in the workers' volumes; default the run
	// folder.
	// +optional
	LogDir string `json:"logDir,omitempty"`

	// Image is TensorBoard's container image; it must have the tensorboard command.
	// Default DefaultTensorBoardImage.
	// +optional
	Image string `json:"image,omitempty"`
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

	// PodsAttempt is the attempt whose Service and pods the gang runs on: the
	// attempts after it, up to Attempt, restarted in place on them. 0: Attempt.
	// +optional
	PodsAttempt int32 `json:"podsAttempt,omitempty"`

	// Restarts is how many times the gang was started again.
	Restarts int32 `json:"restarts,omitempty"`

	// Reason says why the job is in its phase, in a sentence.
	Reason string `json:"reason,omitempty"`

	// WorkersReady is how many workers of the current attempt run.
	// +optional
	WorkersReady int32 `json:"workersReady,omitempty"`

	// Workers is the gang's size when it runs with fewer than spec.workers: an elastic
	// gang (spec.minWorkers) of which Kueue admitted only part (its partial admission), or
	// that the operator shrank for workers it could not place (event Resized). Zero while
	// the gang has its full size or waits.
	// +optional
	Workers int32 `json:"workers,omitempty"`

	// DroppedWorkers are the workers of the pods' attempt (podsAttempt) that an elastic
	// gang went on without in place (event Resized): their node was lost or their pod
	// could not be scheduled. Their pods are deleted and not replaced; the other workers
	// keep their pods and run renumbered, status.workers of them. Empty once the gang runs
	// on new pods.
	// +listType=set
	// +optional
	DroppedWorkers []int32 `json:"droppedWorkers,omitempty"`

	// LostNodes are the lost nodes whose workers the gang went without: those of the pods
	// replaced since the gang last ran at its full size, and once an elastic gang has
	// shrunk, the nodes it shrank for. The gang grows back to spec.workers when one of
	// them is ready again. Kept in the status so that an operator that restarts in between
	// still knows.
	// +optional
	LostNodes []string `json:"lostNodes,omitempty"`

	// Conditions are the job's conditions (Created, Running, Restarting, Succeeded,
	// Failed, Suspended), each with its reason.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// StartTime is when the first attempt started.
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job succeeded or failed for good.
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Disruptions is how many restarts were caused by a worker's eviction or preemption;
	// they do not count against maxRestarts.
	// +optional
	Disruptions int32 `json:"disruptions,omitempty"`

	// WorkerReplacements is, by worker index, how many times the operator replaced that
	// worker's pod alone (evicted, OOM-killed, deleted, its node lost) while the rest of
	// the gang kept theirs.
	// +optional
	WorkerReplacements []int32 `json:"workerReplacements,omitempty"`

	// AttemptStartTime is when the current attempt was created (or admitted by Kueue).
	// +optional
	AttemptStartTime *metav1.Time `json:"attemptStartTime,omitempty"`

	// Iteration is the last iteration rank 0 reported, as of the last attempt's end.
	// +optional
	Iteration int64 `json:"iteration,omitempty"`

	// LastMetrics are the metrics of that report.
	// +optional
	LastMetrics map[string]string `json:"lastMetrics,omitempty"`

	// LatestCheckpoint is the name of the latest committed checkpoint in the run folder.
	// +optional
	LatestCheckpoint string `json:"latestCheckpoint,omitempty"`

	// RunDir is the run's folder in the workers' storage path.
	// +optional
	RunDir string `json:"runDir,omitempty"`

	// SourceCommit is the commit of spec.source.git the workers run; every restart checks
	// out the same one.
	// +optional
	SourceCommit string `json:"sourceCommit,omitempty"`

	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// GivenBack is how many times the gang gave back the room its pods held while it
	// started, on a cluster without a gang scheduler: to a gang ahead of it, or because the
	// rest of its workers found no room (condition WaitingForRoom). Each one ended an
	// attempt without counting as a restart; the wait before the next try doubles.
	// +optional
	GivenBack int32 `json:"givenBack,omitempty"`
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
	PhaseSuspended   JobPhase = "Suspended"
)

// Finished reports whether the phase is final.
func (p JobPhase) Finished() bool {
	return p == PhaseSucceeded || p == PhaseFailed
}

// Active reports whether the phase says a job's gang is on its way or running: Pending,
// Running or Restarting.
func (p JobPhase) Active() bool {
	return p == PhasePending || p == PhaseRunning || p == PhaseRestarting
}

// TrainJobList is a list of TrainJobs.
//
// +kubebuilder:object:root=true
type TrainJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainJob `json:"items"`
}

// DefaultMaxDisruptions is MaxDisruptions when the spec does not say.
const DefaultMaxDisruptions = 10

// DefaultTensorBoardImage is the TensorBoard image when spec.kubernetes.tensorboard names
// none: TensorFlow's, which has the tensorboard command.
const DefaultTensorBoardImage = "tensorflow/tensorflow:2.16.1"

// DisruptionLimit is MaxDisruptions, or DefaultMaxDisruptions when unset.
func (s *TrainJobSpec) DisruptionLimit() int32 {
	if s.MaxDisruptions != nil {
		return *s.MaxDisruptions
	}
	return DefaultMaxDisruptions
}

// MinWorkerCount returns the fewest workers the gang may run with: MinWorkers, or the
// worker count when it is unset (a gang that is not elastic).
func (s *TrainJobSpec) MinWorkerCount() int {
	if s.MinWorkers == nil {
		return s.WorkerCount()
	}
	return int(*s.MinWorkers)
}

// DefaultResizeInterval is how long a grow waits for a committed checkpoint when
// ResizeIntervalSeconds is unset.
const DefaultResizeInterval = 10 * time.Minute

// ResizeInterval returns how long a grow of the elastic gang waits for its next committed
// checkpoint before it resizes anyway: ResizeIntervalSeconds, or DefaultResizeInterval
// when unset. 0 resizes at once.
func (s *TrainJobSpec) ResizeInterval() time.Duration {
	if s.ResizeIntervalSeconds == nil {
		return DefaultResizeInterval
	}
	return time.Duration(*s.ResizeIntervalSeconds) * time.Second
}

// GangSize returns the number of workers the gang runs with: status.workers when an
// elastic gang was admitted with fewer than spec.workers, else spec.workers.
func (j *TrainJob) GangSize() int {
	if n := int(j.Status.Workers); n > 0 && n < j.Spec.WorkerCount() {
		return n
	}
	return j.Spec.WorkerCount()
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

// GracePeriod returns the termination grace period in seconds, 30 when unset.
func (s *TrainJobSpec) GracePeriod() int64 {
	if s.TerminationGracePeriodSeconds == nil {
		return 30
	}
	return *s.TerminationGracePeriodSeconds
}

// AnnotationSubmittedBy names who submitted a TrainJob: the user the API server
// authenticated `trainyard submit --kube` as (its SelfSubjectReview).
const AnnotationSubmittedBy = "trainyard.dev/submitted-by"

// AnnotationGang says how the job's gang was described. GangImplicit marks a job of one
// process whose user gave no gang (no --workers, --procs-per-worker or job file: `trainyard
// submit -- python3 train.py`, or a Ray Jobs API submission): there, Ray Train's
// TorchTrainer.fit() may act as Ray's driver and start the gang its ScalingConfig asks for.
const AnnotationGang = "trainyard.dev/gang"

// GangImplicit is AnnotationGang's value for a gang the user did not describe.
const GangImplicit = "implicit"

// ImplicitGang reports whether the job is one process whose gang the user did not
// describe (see AnnotationGang).
func (j *TrainJob) ImplicitGang() bool {
	return j.Annotations[AnnotationGang] == GangImplicit && j.Spec.WorldSize() == 1
}

// The condition types of a TrainJob.
const (
	CondCreated    = "Created"
	CondRunning    = "Running"
	CondRestarting = "Restarting"
	CondSucceeded  = "Succeeded"
	CondFailed     = "Failed"
	CondSuspended  = "Suspended"
	// CondWaitingForRoom is true while a gang that gave its room back waits to try again
	// (operator without Kueue or the scheduler's gang scheduling); its message names what
	// it waits for. False once it makes its pods again.
	CondWaitingForRoom = "WaitingForRoom"
)

// Reasons of the Failed condition (and Events) that the operator's pod policy gives.
const (
	// ReasonPodPolicy fails a job whose pods the operator's pod policy refuses (a
	// privileged container, a host namespace, a hostPath volume, an added capability,
	// a service account or Secret the job may not use); the message names the fields.
	ReasonPodPolicy = "PodPolicyViolation"
	// ReasonInvalidPodTemplate fails a job whose spec.kubernetes.podTemplate is not a
	// partial pod template, or does not merge over the rendered one.
	ReasonInvalidPodTemplate = "InvalidPodTemplate"
	// ReasonWaitingForSecret says that a job waits, before its attempt is created, for a
	// Secret it reads: one that does not exist yet, or one that `trainyard submit --kube`
	// made and is about to give the TrainJob.
	ReasonWaitingForSecret = "WaitingForSecret"
	// ReasonQueued says that a job in a Kueue queue waits for Kueue to admit its gang; the
	// message carries Kueue's own reason ("waiting: Kueue admitted 0 of 8 workers (...)").
	ReasonQueued = "Queued"
	// ReasonGaveWay says that a gang placed in part gave its room back to a gang ahead of
	// it (higher priority, or older) that was placed in part too.
	ReasonGaveWay = "GaveWay"
	// ReasonNoRoom says that a gang placed in part gave its room back after the rest of
	// its workers found no room for a while.
	ReasonNoRoom = "NoRoom"
	// ReasonWaitingForGang says that a gang waits to make its pods behind another gang.
	ReasonWaitingForGang = "WaitingForGang"
)

// LabelTrainJobAccess, set to "true" on a Secret or a ServiceAccount, says that the
// TrainJobs of its namespace may use it: a Secret as git credentials
// (spec.source.git.credentialsSecret), in a secret volume or a variable of the workers;
// a ServiceAccount as the workers' (spec.kubernetes.serviceAccountName). Under the
// operator's restricted pod policy the workers use no other, but the namespace's default
// ServiceAccount and Secrets the TrainJob owns (those `trainyard submit --kube` makes).
const LabelTrainJobAccess = "trainyard.dev/trainjob-access"

// PodAttempt returns the attempt whose pods the current attempt runs on: PodsAttempt
// when the gang restarted in place, else Attempt.
func (s *TrainJobStatus) PodAttempt() int32 {
	if s.PodsAttempt > 0 {
		return s.PodsAttempt
	}
	return s.Attempt
}
