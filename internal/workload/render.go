package workload

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/jobspec"
)

// GPUResource is the extended resource NVIDIA's device plugin advertises.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// Volume names in a worker pod.
const (
	binVolume     = "trainyard-bin"
	shmVolume     = "dshm"
	storageVolume = "trainyard-storage"
	// initMount is where the init container sees the binary's volume.
	initMount = "/copy"
)

// Options are what the operator adds to a TrainJob to render it.
type Options struct {
	// Image is the trainyard image the init container copies the binary from.
	Image string
	// Placement is what the queue that admitted the gang assigned (placement.go); nil
	// for none.
	Placement *Placement
	// Workers is the gang's size when it runs with fewer than spec.workers (an elastic
	// gang partly admitted); 0 for spec.workers. The workers see it as spec.workers.
	Workers int
	// PerGPU are the CPU and memory requests per GPU of a worker whose job names none
	// (pergpu.go); the zero value adds none.
	PerGPU PerGPU
}

// Attempt is what the operator creates for one attempt of a TrainJob: a headless Service,
// and one pod per worker (Pod), all made from the same template.
type Attempt struct {
	Service *corev1.Service
	// Template is every worker's pod; Pod gives it its name, host name and index.
	Template *corev1.PodTemplateSpec
	// Workers is the gang's size: Pod(0) to Pod(Workers-1).
	Workers int
	// EphemeralStorage is true when no volume is mounted at the storage path, so the run
	// folder (checkpoints, logs) lives in an emptyDir that goes with the pod.
	EphemeralStorage bool

	job     string
	attempt int
	meta    metav1.ObjectMeta // the attempt's namespace, labels and owner
}

// PodName is the name of worker i's pod in attempt n of job, which is also its host name
// under the attempt's headless Service: "<job>-a<N>-<i>". The name is fixed, so a pod is
// never made twice (the API server refuses a second), and a replaced worker keeps its DNS
// name: its replacement is created only once the pod before it is gone.
func PodName(job string, n, i int) string {
	return AttemptName(job, n) + "-" + strconv.Itoa(i)
}

// Pod is worker i's pod: the template with its name, host name, index label and
// EnvWorker.
func (a *Attempt) Pod(i int) *corev1.Pod {
	t := a.Template.DeepCopy()
	name := PodName(a.job, a.attempt, i)
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	p.Name, p.Namespace, p.OwnerReferences = name, a.meta.Namespace, a.meta.OwnerReferences
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[LabelWorkerIndex] = strconv.Itoa(i)
	p.Spec.Hostname = name
	for c := range p.Spec.Containers {
		if p.Spec.Containers[c].Name == WorkerContainer {
			p.Spec.Containers[c].Env = append(p.Spec.Containers[c].Env, corev1.EnvVar{Name: EnvWorker, Value: strconv.Itoa(i)})
		}
	}
	return p
}

// Pods are every worker's pod.
func (a *Attempt) Pods() []*corev1.Pod {
	out := make([]*corev1.Pod, a.Workers)
	for i := range out {
		out[i] = a.Pod(i)
	}
	return out
}

// Defaulted returns a copy of job with the defaults the workers need: those of every
// backend, the storage path inside the pod, and a run name unique to this TrainJob.
func Defaulted(job *v1.TrainJob) *v1.TrainJob {
	out := job.DeepCopy()
	s := &out.Spec
	jobspec.DefaultCommon(s)
	if s.StoragePath == "" {
		s.StoragePath = DefaultStoragePath
	}
	if s.RunName == "" {
		s.RunName = out.Name + "-" + shortUID(string(out.UID))
	}
	if s.Kubernetes == nil {
		s.Kubernetes = &v1.KubernetesSpec{}
	}
	return out
}

func shortUID(uid string) string {
	uid = strings.ReplaceAll(uid, "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return uid
}

// RunDir is the run's folder inside the workers' pods.
func RunDir(job *v1.TrainJob) string {
	d := Defaulted(job)
	return filepath.Join(d.Spec.StoragePath, d.Spec.RunName)
}

// Labels are the labels of everything attempt n of job consists of.
func Labels(job *v1.TrainJob, n int) map[string]string {
	return map[string]string{LabelJob: job.Name, LabelJobUID: string(job.UID), LabelAttempt: strconv.Itoa(n),
		LabelManagedBy: ManagedBy}
}

// Render returns attempt n of job: its headless Service and its workers' pod template.
// Everything is owned by job. It fails only on a pod template override that does not
// apply.
func Render(job *v1.TrainJob, n int, opts Options) (*Attempt, error) {
	d := Defaulted(job)
	if jobspec.IsURI(d.Spec.StoragePath) {
		return nil, fmt.Errorf("spec.storagePath %s: object storage is not supported on Kubernetes yet (trainyard run and the job server "+
			"take s3://); mount a PersistentVolumeClaim at a folder and give that folder", d.Spec.StoragePath)
	}
	var bounds []corev1.EnvVar // an elastic gang's, once its job in the pods says neither
	if most := d.Spec.WorkerCount(); opts.Workers > 0 && opts.Workers < most {
		bounds = []corev1.EnvVar{{Name: EnvMinWorkers, Value: strconv.Itoa(d.Spec.MinWorkerCount())},
			{Name: EnvMaxWorkers, Value: strconv.Itoa(most)}}
		d.Spec.Workers, d.Spec.MinWorkers = ptr(int32(opts.Workers)), nil
	}
	name := AttemptName(job.Name, n)
	owner := ownerRef(job)
	meta := metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: Labels(job, n),
		OwnerReferences: []metav1.OwnerReference{owner}}
	pod, ephemeral, err := podTemplate(d, n, opts)
	if err != nil {
		return nil, err
	}
	for i := range pod.Spec.Containers {
		if c := &pod.Spec.Containers[i]; c.Name == WorkerContainer {
			c.Env = append(c.Env, bounds...)
		}
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: *meta.DeepCopy(),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{LabelJobUID: string(job.UID), LabelAttempt: strconv.Itoa(n)},
			Ports: []corev1.ServicePort{{Name: "rendezvous", Port: MasterPort, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(MasterPort)}},
		},
	}
	return &Attempt{Service: svc, Template: pod, Workers: d.Spec.WorkerCount(), EphemeralStorage: ephemeral,
		job: job.Name, attempt: n, meta: meta}, nil
}

// podLabels are a worker pod's labels: the user's, with Trainyard's over them.
func podLabels(d *v1.TrainJob, n int) map[string]string {
	out := map[string]string{}
	maps.Copy(out, d.Spec.Kubernetes.PodLabels)
	maps.Copy(out, Labels(d, n))
	return out
}

func ownerRef(job *v1.TrainJob) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1.APIVersion, Kind: v1.Kind, Name: job.Name, UID: job.UID,
		Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
}

// podTemplate renders a worker's pod, with the user's override merged over it.
func podTemplate(d *v1.TrainJob, n int, opts Options) (*corev1.PodTemplateSpec, bool, error) {
	k := d.Spec.Kubernetes
	worker, ephemeral, err := workerContainer(d, n)
	if err != nil {
		return nil, false, err
	}
	pod := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels(d, n), Annotations: k.PodAnnotations},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			Subdomain:                     AttemptName(d.Name, n),
			TerminationGracePeriodSeconds: ptr(d.Spec.GracePeriod() + 10),
			ServiceAccountName:            k.ServiceAccountName,
			ImagePullSecrets:              k.ImagePullSecrets,
			NodeSelector:                  k.NodeSelector,
			Tolerations:                   tolerations(d),
			Affinity:                      k.Affinity,
			PriorityClassName:             k.PriorityClassName,
			SchedulerName:                 k.SchedulerName,
			SecurityContext:               podSecurity(),
			// The workers need no credentials for the API server; a pod template may mount them.
			AutomountServiceAccountToken: ptr(false),
			InitContainers:               []corev1.Container{initContainer(opts)},
			Containers:                   []corev1.Container{worker},
			Volumes:                      volumes(k, ephemeral),
		},
	}
	addSource(d, &pod.Spec)
	addGang(d, &pod.Spec)
	opts.Placement.apply(&pod.Spec)
	if k.PodTemplate != nil && len(k.PodTemplate.Raw) > 0 {
		if pod, err = mergeTemplate(pod, k.PodTemplate.Raw); err != nil {
			return nil, false, err
		}
	}
	// After the merge: the template's own requests and limits win over the defaults.
	opts.PerGPU.apply(&pod.Spec)
	return pod, ephemeral, nil
}

func initContainer(opts Options) corev1.Container {
	return corev1.Container{
		Name:            InitContainer,
		Image:           opts.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		// The trainyard image is the binary at /trainyard, so the volume cannot be
		// mounted at BinDir (below a file) in this container.
		Command:         []string{"/trainyard", "copy-self", initMount},
		VolumeMounts:    []corev1.VolumeMount{{Name: binVolume, MountPath: initMount}},
		SecurityContext: containerSecurity(),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			// The mapped binary is about 32 MiB of it; copy-self keeps its page cache small.
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
	}
}

func workerContainer(d *v1.TrainJob, n int) (corev1.Container, bool, error) {
	k := d.Spec.Kubernetes
	spec, err := json.Marshal(workerJob(d))
	if err != nil {
		return corev1.Container{}, false, fmt.Errorf("encode the job for its workers: %w", err)
	}
	env := []corev1.EnvVar{
		{Name: EnvJob, Value: string(spec)},
		{Name: EnvAttempt, Value: strconv.Itoa(n)},
		{Name: EnvMasterAddr, Value: MasterAddr(d.Name, n)},
		{Name: EnvMasterPort, Value: strconv.Itoa(MasterPort)},
		{Name: EnvMilliCPU, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
			ContainerName: WorkerContainer, Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
	}
	if d.Spec.Resources.GPU == 0 {
		// Without this, NVIDIA's container runtime shows every GPU of the node to a pod
		// that asked for none.
		env = append(env, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"})
	}
	mounts := []corev1.VolumeMount{
		{Name: binVolume, MountPath: BinDir, ReadOnly: true},
		{Name: shmVolume, MountPath: "/dev/shm"},
	}
	mounts = append(mounts, k.VolumeMounts...)
	ephemeral := !mounted(k.VolumeMounts, d.Spec.StoragePath)
	if ephemeral {
		mounts = append(mounts, corev1.VolumeMount{Name: storageVolume, MountPath: d.Spec.StoragePath})
	}
	return corev1.Container{
		Name:            WorkerContainer,
		Image:           k.Image,
		ImagePullPolicy: k.ImagePullPolicy,
		Command:         []string{BinPath, "worker"},
		WorkingDir:      d.Spec.WorkingDir,
		Env:             env,
		Ports: []corev1.ContainerPort{{Name: "rendezvous", ContainerPort: MasterPort, Protocol: corev1.ProtocolTCP},
			{Name: "progress", ContainerPort: ProgressPort, Protocol: corev1.ProtocolTCP}},
		Resources:                resources(&d.Spec.Resources),
		VolumeMounts:             mounts,
		TerminationMessagePath:   TerminationLog,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurity(),
	}, ephemeral, nil
}

// workerJob is the part of the job a worker needs: no Kubernetes settings, no status.
func workerJob(d *v1.TrainJob) *v1.TrainJob {
	return &v1.TrainJob{TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, UID: d.UID},
		Spec:       func() v1.TrainJobSpec { s := *d.Spec.DeepCopy(); s.Kubernetes = nil; return s }()}
}

// mounted reports whether a mount holds path (is path or one of its parents).
func mounted(mounts []corev1.VolumeMount, path string) bool {
	path = filepath.Clean(path)
	for _, m := range mounts {
		mp := filepath.Clean(m.MountPath)
		if path == mp || strings.HasPrefix(path, mp+"/") || mp == "/" {
			return true
		}
	}
	return false
}

func resources(r *v1.WorkerResources) corev1.ResourceRequirements {
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	if r.CPU != nil {
		req[corev1.ResourceCPU] = *r.CPU
	}
	if r.Memory != nil {
		req[corev1.ResourceMemory] = *r.Memory
		lim[corev1.ResourceMemory] = *r.Memory
	}
	if r.GPU > 0 {
		q := *resource.NewQuantity(int64(r.GPU), resource.DecimalSI)
		req[GPUResource], lim[GPUResource] = q, q
	}
	out := corev1.ResourceRequirements{}
	if len(req) > 0 {
		out.Requests = req
	}
	if len(lim) > 0 {
		out.Limits = lim
	}
	return out
}

func tolerations(d *v1.TrainJob) []corev1.Toleration {
	out := append([]corev1.Toleration(nil), d.Spec.Kubernetes.Tolerations...)
	if d.Spec.Resources.GPU > 0 {
		out = append(out, corev1.Toleration{Key: string(GPUResource), Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

func volumes(k *v1.KubernetesSpec, ephemeral bool) []corev1.Volume {
	out := []corev1.Volume{
		{Name: binVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: shmVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	out = append(out, k.Volumes...)
	if ephemeral {
		out = append(out, corev1.Volume{Name: storageVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return out
}

func ptr[T any](v T) *T { return &v }
