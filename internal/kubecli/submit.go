package kubecli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gitsource"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/podpolicy"
	"github.com/trainyard/trainyard/internal/workload"
)

// JobFlags are the flags of submit that only a cluster uses: they set spec.kubernetes
// over the job file's.
type JobFlags struct {
	Image          string
	PullPolicy     string
	Queue          string
	PriorityClass  string
	ServiceAccount string
	NodeSelector   []string
	// Data are Arena's --data NAME:PATH[:ro]: the PVC NAME mounted at PATH in every worker.
	Data []string
	// Arena's spellings: --selector (as --node-selector), --toleration KEY|all,
	// --annotation and --label KEY=VALUE on the workers' pods.
	Selector, Tolerations, Annotations, Labels []string
	// TensorBoard, LogDir and TensorBoardImage are Arena's --tensorboard, --logdir and
	// --tensorboard-image.
	TensorBoard              bool
	LogDir, TensorBoardImage string
	// SyncSecret names a Secret with the git source's credentials (username, password).
	SyncSecret string
	// PodPolicy is the operator's pod policy that submit checks the job against before
	// creating it: "restricted" (the default) or "off" (for a cluster whose operator runs
	// with --pod-policy=off).
	PodPolicy string
	// DryRun is "server" (the API server checks and defaults the job and stores nothing),
	// "client" (nothing is sent: the job and what the operator renders for its first
	// attempt are printed), or "" (the job is created).
	DryRun string
	// ShowChildren, with DryRun client, also prints what the operator creates for the
	// first attempt, for reading (the TrainJob alone is what kubectl apply takes).
	ShowChildren bool
	// WorkloadSlices has an elastic gang in a Kueue queue grow while it runs, through
	// Kueue's workload slices (the TrainJob's kueue.x-k8s.io/elastic-job annotation).
	WorkloadSlices bool

	fs *pflag.FlagSet
}

// jobFlagNames are the names of the flags JobFlags binds.
var jobFlagNames = []string{"image", "image-pull-policy", "queue", "priority-class", "service-account", "node-selector", "data", "dry-run",
	"selector", "toleration", "annotation", "label", "tensorboard", "logdir", "tensorboard-image", "sync-secret", "pod-policy", "show-children", "workload-slices"}

// Bind registers the flags on fs.
func (f *JobFlags) Bind(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.Image, "image", "", "with --kube: the workers' container image (it needs the command and torch, not trainyard)")
	fs.StringVar(&f.PullPolicy, "image-pull-policy", "", "with --kube: Always, IfNotPresent or Never")
	fs.StringVar(&f.Queue, "queue", "", "with --kube: admit the whole gang through this Kueue local queue")
	fs.BoolVar(&f.WorkloadSlices, "workload-slices", false, "with --kube --queue and --workers MIN:MAX: grow the gang while it runs when the queue has room,\n"+
		"through Kueue's workload slices (the TrainJob gets Kueue's annotation "+ElasticJobAnnotation+"=true;\n"+
		"Kueue must run with its ElasticJobsViaWorkloadSlices feature gate); without it the gang grows at its next admission")
	fs.StringVar(&f.PriorityClass, "priority-class", "", "with --kube: the workers' pods' priority class")
	fs.StringVar(&f.ServiceAccount, "service-account", "", "with --kube: the workers' service account")
	fs.StringArrayVar(&f.NodeSelector, "node-selector", nil, "with --kube: run the workers on nodes with this KEY=VALUE label (repeatable)")
	fs.StringArrayVar(&f.Data, "data", nil, "with --kube: mount the PersistentVolumeClaim NAME at PATH in every worker, as Arena's --data:\n"+
		"NAME:PATH, or NAME:PATH:ro for read-only (repeatable)")
	fs.StringVar(&f.DryRun, "dry-run", "", "with --kube: create nothing; client: print the TrainJob, with no cluster ('| kubectl apply -f -'\n"+
		"creates it); server (the default of a bare --dry-run): have the cluster check the job")
	fs.Lookup("dry-run").NoOptDefVal = DryRunServer
	fs.BoolVar(&f.ShowChildren, "show-children", false, "with --kube --dry-run=client: also print, to read, the headless Service and the workers' pods (and TensorBoard)\n"+
		"the operator creates for the first attempt, with a placeholder UID and the operator's built-in CPU and memory per GPU\n"+
		"(an operator run with other --worker-cpu-per-gpu or --worker-memory-per-gpu gives its own); apply only the TrainJob")
	fs.StringArrayVar(&f.Selector, "selector", nil, "with --kube: Arena's spelling of --node-selector KEY=VALUE (repeatable)")
	fs.StringArrayVar(&f.Tolerations, "toleration", nil, "with --kube: tolerate the taints of this key, or all taints with 'all', as Arena's (repeatable)")
	fs.StringArrayVar(&f.Annotations, "annotation", nil, "with --kube: add the annotation KEY=VALUE to the workers' pods (repeatable)")
	fs.StringArrayVar(&f.Labels, "label", nil, "with --kube: add the label KEY=VALUE to the workers' pods (repeatable)")
	fs.BoolVar(&f.TensorBoard, "tensorboard", false, "with --kube: run a TensorBoard for the job (a Deployment and a Service the TrainJob owns)\n"+
		"reading --logdir (default: the run folder) from the workers' volume; 'get --kube' says how to open it")
	fs.StringVar(&f.LogDir, "logdir", "", "with --kube --tensorboard: the folder TensorBoard reads, on a volume of the workers")
	fs.StringVar(&f.TensorBoardImage, "tensorboard-image", "", "with --kube --tensorboard: TensorBoard's image (default "+v1.DefaultTensorBoardImage+")")
	fs.StringVar(&f.SyncSecret, "sync-secret", "", "with --kube --sync-source: a Secret with keys username and password for the repository\n"+
		"(default: one made from "+gitsource.EnvUsername+" and "+gitsource.EnvPassword+" when they are set, owned by the TrainJob);\n"+
		"the operator uses it only when it is labelled "+v1.LabelTrainJobAccess+"=true")
	fs.StringVar(&f.PodPolicy, "pod-policy", string(podpolicy.Default), "with --kube: refuse up front what the operator's pod policy refuses (privileged pods,\n"+
		"host namespaces and folders, network volumes, added capabilities, unconfined profiles,\n"+
		"ServiceAccounts and Secrets not labelled "+v1.LabelTrainJobAccess+"=true);\n"+
		"off: leave it to a cluster whose operator runs with --pod-policy=off")
}

// The values of --dry-run.
const (
	DryRunClient = "client"
	DryRunServer = "server"
)

// CheckDryRun refuses a --dry-run value that is neither client nor server.
func (f *JobFlags) CheckDryRun() error {
	switch f.DryRun {
	case "", DryRunClient, DryRunServer:
		return nil
	}
	return inputError("--dry-run=%s: use --dry-run=client (print what would be created, no cluster needed) or --dry-run=server", f.DryRun)
}

// PlaceholderUID stands for a TrainJob's UID in a --dry-run=client rendering of what the
// operator creates.
const PlaceholderUID = "00000000-0000-0000-0000-000000000000"

// RenderFirstAttempt returns what the operator creates for job's first attempt in
// namespace, with the trainyard image image: the headless Service and the workers' pods,
// from the operator's own rendering (internal/workload). A job without a name gets its
// generateName and "<name>" in their place. The workers' requests per GPU are the
// operator's built-in ones (workload.DefaultPerGPU): what an operator run with other
// --worker-cpu-per-gpu or --worker-memory-per-gpu gives cannot be known from here.
func RenderFirstAttempt(job *v1.TrainJob, namespace, image string) (*v1.TrainJob, *workload.Attempt, error) {
	j := job.DeepCopy()
	if j.Namespace == "" {
		j.Namespace = namespace
	}
	if j.Name == "" {
		j.Name = j.GenerateName + "<name>"
	}
	r := j.DeepCopy()
	r.UID = PlaceholderUID // the API server gives the real one; the run name and labels use it
	a, err := workload.Render(r, 1, workload.Options{Image: image, PerGPU: workload.DefaultPerGPU()})
	if err != nil {
		return nil, nil, &InputError{Err: err}
	}
	return j, a, nil
}

// Names returns the names of the flags JobFlags binds.
func (f *JobFlags) Names() []string { return slices.Clone(jobFlagNames) }

// Given returns the flags of JobFlags the user set, as "--name".
func (f *JobFlags) Given() []string {
	var out []string
	for _, name := range jobFlagNames {
		if f.fs != nil && f.fs.Changed(name) {
			out = append(out, "--"+name)
		}
	}
	return out
}

// apply sets spec.kubernetes from the flags the user set.
func (f *JobFlags) apply(job *v1.TrainJob) error {
	if len(f.Given()) == 0 {
		return nil
	}
	k := job.Spec.Kubernetes
	if k == nil {
		k = &v1.KubernetesSpec{}
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&k.Image, f.Image)
	set((*string)(&k.ImagePullPolicy), f.PullPolicy)
	set(&k.QueueName, f.Queue)
	set(&k.PriorityClassName, f.PriorityClass)
	set(&k.ServiceAccountName, f.ServiceAccount)
	if err := addData(k, f.Data); err != nil {
		return err
	}
	for _, m := range []struct {
		flag string
		kvs  []string
		dst  *map[string]string
	}{{"--node-selector", f.NodeSelector, &k.NodeSelector}, {"--selector", f.Selector, &k.NodeSelector},
		{"--annotation", f.Annotations, &k.PodAnnotations}, {"--label", f.Labels, &k.PodLabels}} {
		if err := addPairs(m.flag, m.kvs, m.dst); err != nil {
			return err
		}
	}
	for _, key := range f.Tolerations {
		t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists}
		if key == "all" {
			t.Key = ""
		}
		k.Tolerations = append(k.Tolerations, t)
	}
	if err := f.applyTensorBoard(k); err != nil {
		return err
	}
	if err := f.applyWorkloadSlices(job, k); err != nil {
		return err
	}
	if f.SyncSecret != "" {
		if job.Spec.Source == nil || job.Spec.Source.Git == nil {
			return errors.New("--sync-secret names the credentials of a git source: give --sync-source URL too")
		}
		job.Spec.Source.Git.CredentialsSecret = f.SyncSecret
	}
	job.Spec.Kubernetes = k
	return nil
}

// ElasticJobAnnotation is Kueue's annotation that has a job grow through workload slices.
const ElasticJobAnnotation = "kueue.x-k8s.io/elastic-job"

// applyWorkloadSlices annotates the job for Kueue's workload slices (--workload-slices),
// which grow an elastic gang in a queue.
func (f *JobFlags) applyWorkloadSlices(job *v1.TrainJob, k *v1.KubernetesSpec) error {
	if !f.WorkloadSlices {
		return nil
	}
	if k.QueueName == "" && job.Labels[workload.LabelQueue] == "" {
		return errors.New("--workload-slices grows a gang through Kueue: give --queue too")
	}
	if job.Spec.MinWorkerCount() >= job.Spec.WorkerCount() {
		return errors.New("--workload-slices grows an elastic gang: give --workers MIN:MAX too (say --workers 2:4)")
	}
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[ElasticJobAnnotation] = "true"
	return nil
}

// addPairs adds the KEY=VALUE pairs of a repeatable flag to *dst.
func addPairs(flag string, kvs []string, dst *map[string]string) error {
	for _, kv := range kvs {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || key == "" {
			return fmt.Errorf("%s %q: must be KEY=VALUE", flag, kv)
		}
		if *dst == nil {
			*dst = map[string]string{}
		}
		(*dst)[key] = value
	}
	return nil
}

// applyTensorBoard sets spec.kubernetes.tensorboard from --tensorboard, --logdir and
// --tensorboard-image.
func (f *JobFlags) applyTensorBoard(k *v1.KubernetesSpec) error {
	if !f.TensorBoard {
		if f.LogDir != "" || f.TensorBoardImage != "" {
			return errors.New("--logdir and --tensorboard-image say how to run the job's TensorBoard: give --tensorboard too")
		}
		return nil
	}
	if f.LogDir != "" && (!path.IsAbs(f.LogDir) || path.Clean(f.LogDir) != f.LogDir) {
		return fmt.Errorf("--logdir %q: give an absolute, clean path in the workers' containers, such as /mnist_data/logs", f.LogDir)
	}
	if k.TensorBoard == nil {
		k.TensorBoard = &v1.TensorBoardSpec{}
	}
	if f.LogDir != "" {
		k.TensorBoard.LogDir = f.LogDir
	}
	if f.TensorBoardImage != "" {
		k.TensorBoard.Image = f.TensorBoardImage
	}
	return nil
}

// addData mounts the PVCs of --data NAME:PATH[:ro] in the workers.
func addData(k *v1.KubernetesSpec, data []string) error {
	for _, d := range data {
		claim, mount, ro, err := ParseData(d)
		if err != nil {
			return err
		}
		for _, m := range k.VolumeMounts {
			if m.MountPath == mount {
				return fmt.Errorf("--data %s: %s is mounted already (by volume %s)", d, mount, m.Name)
			}
		}
		name := dataVolumeName(claim)
		if !slices.ContainsFunc(k.Volumes, func(v corev1.Volume) bool { return v.Name == name }) {
			k.Volumes = append(k.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		}
		k.VolumeMounts = append(k.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: mount, ReadOnly: ro})
	}
	return nil
}

// CheckClaims refuses the PersistentVolumeClaims of --data (kf.Data) that do not exist
// in the namespace: the workers would wait for them forever. Claims a job file names
// are not checked (they may be made after the job), nor claims the user may not read.
func (c *Cluster) CheckClaims(ctx context.Context, namespace string, kf *JobFlags) error {
	if namespace == "" {
		namespace = c.Namespace
	}
	for _, d := range kf.Data {
		claim, _, _, err := ParseData(d)
		if err != nil {
			return &InputError{Err: err}
		}
		_, err = c.Core.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return inputError("--data %s: PersistentVolumeClaim %q not found in namespace %q: create it first, or give another "+
				"(trainyard data list --kube lists them); nothing was created", d, claim, namespace)
		case err != nil && !apierrors.IsForbidden(err):
			return c.explain(err)
		}
	}
	return nil
}

// ParseData reads Arena's --data NAME:PATH[:ro|:rw].
func ParseData(d string) (claim, mount string, readOnly bool, err error) {
	parts := strings.Split(d, ":")
	if len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw") {
		readOnly, parts = parts[2] == "ro", parts[:2]
	}
	if len(parts) != 2 {
		return "", "", false, fmt.Errorf("--data %q: use NAME:PATH, or NAME:PATH:ro (the PersistentVolumeClaim NAME mounted at PATH)", d)
	}
	claim, mount = parts[0], parts[1]
	if msgs := validation.IsDNS1123Subdomain(claim); len(msgs) > 0 {
		return "", "", false, fmt.Errorf("--data %q: %q is not a PersistentVolumeClaim name: %s", d, claim, strings.Join(msgs, "; "))
	}
	if !strings.HasPrefix(mount, "/") || path.Clean(mount) != mount || mount == "/" {
		return "", "", false, fmt.Errorf("--data %q: the path %q must be an absolute, clean path in the workers' containers, such as /mnist_data", d, mount)
	}
	return claim, mount, readOnly, nil
}

// dataVolumeName is the volume name of a --data claim: a DNS label.
func dataVolumeName(claim string) string {
	name := "data-" + strings.ReplaceAll(claim, ".", "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	return name
}

// BuildJob builds the TrainJob that submit --kube creates from the job file, the flags
// and the command. Fields left out stay out: the operator and the workers default them
// with the cluster's paths (the storage path is workload.DefaultStoragePath, the working
// folder the image's). A defaulted copy is checked with jobspec as trainyard run checks a
// job, and a job without an image is refused, before anything is sent. Its errors are
// *InputError. The warnings are for the user: nothing is wrong, but something is likely
// not what they meant.
func BuildJob(flags *jobspec.Flags, kf *JobFlags, command []string) (job *v1.TrainJob, warnings []string, err error) {
	job, err = flags.Job(command)
	if err != nil {
		return nil, nil, &InputError{Err: err}
	}
	if flags.File != "" && flags.WorkingDir == "" {
		// Load made a relative workingDir relative to the job file, a folder on this
		// machine; in a pod it is relative to the image's working folder.
		if job.Spec.WorkingDir, err = rawWorkingDir(flags.File); err != nil {
			return nil, nil, &InputError{Err: err}
		}
	}
	if err := kf.apply(job); err != nil {
		return nil, nil, &InputError{Err: err}
	}
	if _, err := flags.Resolve(command, jobspec.Env{WorkDir: "/", Home: "/root", Now: time.Now}); err != nil {
		return nil, nil, &InputError{Err: err}
	}
	if src, ok := jobspec.GitSource(&job.Spec); ok && strings.HasPrefix(strings.ToLower(src.URL), "file:") {
		return nil, nil, inputError("--sync-source %s is a repository on this machine, which the pods cannot reach: "+
			"give the URL they clone from (https://...)", src.URL)
	}
	if job.Spec.Kubernetes == nil || job.Spec.Kubernetes.Image == "" {
		return nil, nil, inputError("no image: on Kubernetes every worker runs in a container, so the job needs its image: " +
			"give --image IMAGE (or spec.kubernetes.image in the job file); the image needs the job's command and torch, not trainyard")
	}
	a, err := workload.Render(job, 1, workload.Options{Image: "trainyard", PerGPU: workload.DefaultPerGPU()})
	if err != nil {
		// The operator would fail the job with this reason; say it before it is created.
		return nil, nil, &InputError{Err: err}
	}
	level, err := kf.policyLevel()
	if err != nil {
		return nil, nil, &InputError{Err: err}
	}
	if err := checkPolicy(job, &a.Template.Spec, level, nil); err != nil {
		return nil, nil, err
	}
	if _, err := workload.RenderTensorBoard(job); err != nil {
		return nil, nil, &InputError{Err: fmt.Errorf("--tensorboard: %w", err)}
	}
	clearServerFields(job)
	if job.Name == "" {
		job.GenerateName = namePrefix(append(append([]string{}, job.Spec.Command...), job.Spec.Args...))
	}
	warnings = append(warnings, podPathWarnings(&job.Spec)...)
	if !storageOnVolume(&job.Spec) {
		warnings = append(warnings, fmt.Sprintf("no volume is mounted at the storage path %s (spec.kubernetes.volumes and volumeMounts): "+
			"the run folder is the pods' own, so checkpoints do not survive a restart and the logs go with the pods", storagePath(&job.Spec)))
	}
	return job, warnings, nil
}

// podPathWarnings says what a job file written for this machine means in a pod: a storage
// path or working folder under "~" is the home of the container's user, not yours.
func podPathWarnings(s *v1.TrainJobSpec) []string {
	var w []string
	for _, f := range []struct{ name, value string }{{"storagePath", s.StoragePath}, {"workingDir", s.WorkingDir}} {
		if f.value == "~" || strings.HasPrefix(f.value, "~/") {
			w = append(w, fmt.Sprintf("spec.%s %s: in a pod, ~ is the home folder of the container's user (often /root), "+
				"not yours on this machine; give a path in the container, such as one on a mounted volume", f.name, f.value))
		}
	}
	return w
}

// rawWorkingDir returns the job file's workingDir as written.
func rawWorkingDir(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read job file: %w", err)
	}
	job, err := jobspec.Parse(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return job.Spec.WorkingDir, nil
}

// clearServerFields drops what the API server sets, so that a job printed by 'get -o
// yaml' can be submitted again.
func clearServerFields(job *v1.TrainJob) {
	job.APIVersion, job.Kind = v1.APIVersion, v1.Kind
	m := &job.ObjectMeta
	m.ResourceVersion, m.UID, m.Generation, m.ManagedFields = "", "", 0, nil
	m.CreationTimestamp, m.DeletionTimestamp, m.DeletionGracePeriodSeconds = metav1.Time{}, nil, nil
	m.OwnerReferences, m.Finalizers = nil, nil
	job.Status = v1.TrainJobStatus{}
}

// namePrefix is the generateName of a job without a name: the script the command runs,
// such as "train-" (the API server appends 5 characters). The name must start with a
// letter and, whole, be at most 45 characters.
func namePrefix(command []string) string {
	base := strings.TrimLeft(jobspec.ScriptName(command), "-0123456789")
	base = strings.TrimRight(base[:min(len(base), 30)], "-")
	if base == "" {
		base = "job"
	}
	return base + "-"
}

// storagePath is the storage path the workers use.
func storagePath(s *v1.TrainJobSpec) string {
	if s.StoragePath != "" {
		return s.StoragePath
	}
	return workload.DefaultStoragePath
}

// storageOnVolume reports whether a volume is mounted at (or above) the job's storage
// path in the worker container, or may be (a pod template could mount one).
func storageOnVolume(s *v1.TrainJobSpec) bool {
	p := storagePath(s)
	if !path.IsAbs(p) {
		return true // relative to somewhere in the pod: cannot tell
	}
	k := s.Kubernetes
	if k == nil {
		return false
	}
	if k.PodTemplate != nil {
		return true
	}
	return mountCovers(k.VolumeMounts, path.Clean(p))
}

// mountCovers reports whether one of mounts is at p or at a folder above it.
func mountCovers(mounts []corev1.VolumeMount, p string) bool {
	for _, m := range mounts {
		mp := path.Clean(m.MountPath)
		if p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") {
			return true
		}
	}
	return false
}

// Submit creates job in its namespace (the cluster's when it names none) and returns it
// as the API server stored it; with dryRun nothing is stored.
func (c *Cluster) Submit(ctx context.Context, job *v1.TrainJob, dryRun bool) (*v1.TrainJob, error) {
	switch {
	case job.Namespace == "":
		job.Namespace = c.Namespace
	case c.NamespaceGiven && job.Namespace != c.Namespace:
		return nil, inputError("the job file's metadata.namespace %q is not the namespace %q that -n names", job.Namespace, c.Namespace)
	}
	out, err := c.Jobs.Create(ctx, job, dryRun)
	if err == nil {
		return out, nil
	}
	err = c.explain(err)
	var se *apierrors.StatusError
	switch {
	case apierrors.IsInvalid(err):
		return nil, invalidError("the job", err)
	case apierrors.IsAlreadyExists(err):
		return nil, fmt.Errorf("TrainJob %q already exists in namespace %q: give another --name, or delete it first", job.Name, job.Namespace)
	case apierrors.IsNotFound(err) && errors.As(err, &se) && se.ErrStatus.Details != nil && se.ErrStatus.Details.Kind == "namespaces":
		return nil, fmt.Errorf("namespace %q does not exist", job.Namespace)
	case apierrors.IsNotFound(err):
		return nil, notServed(c)
	}
	return nil, err
}

// WhoAmI is the user the API server authenticates this client as (a SelfSubjectReview),
// or "" when it does not say.
func (c *Cluster) WhoAmI(ctx context.Context) string {
	r, err := c.Core.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return ""
	}
	return r.Status.UserInfo.Username
}
