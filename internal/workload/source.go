package workload

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gitsource"
	"github.com/trainyard/trainyard/internal/jobspec"
)

// What a git source adds to a worker pod.
const (
	// DefaultGitWorkingDir is the workers' working folder when a job with a git source
	// names none: Arena's default --working-dir, which holds code/.
	DefaultGitWorkingDir = "/root"
	// codeVolume is the emptyDir the init container clones into; the worker container
	// mounts it at <working dir>/code.
	codeVolume = "trainyard-code"
	// initCodeMount is where the init container sees it.
	initCodeMount = "/code"
	// CommitPrefix starts the init container's termination message: the commit it cloned.
	CommitPrefix = "commit "
	// SecretUsernameKey and SecretPasswordKey are the keys of a git credentials Secret.
	SecretUsernameKey = "username"
	SecretPasswordKey = "password"
)

// gitSource is the job's git source, if any, with the commit to check out: the one the
// spec pins, else the one the first attempt cloned (status.sourceCommit), so that every
// restart runs the same code.
func gitSource(d *v1.TrainJob) (*v1.GitSource, bool) {
	if _, ok := jobspec.GitSource(&d.Spec); !ok {
		return nil, false
	}
	g := d.Spec.Source.Git.DeepCopy()
	if g.Revision == "" {
		g.Revision = d.Status.SourceCommit
	}
	return g, true
}

// workingDir is where the worker container starts: the spec's folder, or Arena's default
// when a git source is cloned below it, or the image's.
func workingDir(d *v1.TrainJob) string {
	if _, ok := gitSource(d); ok && d.Spec.WorkingDir == "" {
		return DefaultGitWorkingDir
	}
	return d.Spec.WorkingDir
}

// CodeDir is where a job's git source is in its workers: <working dir>/code/<repo>.
func CodeDir(d *v1.TrainJob) string {
	g, ok := gitSource(d)
	if !ok {
		return ""
	}
	return jobspec.CodeDir(workingDir(d), g.URL)
}

// cloneArgs are the init container's arguments that clone the git source after copying
// the binary (see `trainyard copy-self`).
func cloneArgs(g *v1.GitSource) []string {
	args := []string{"--git-url", g.URL, "--git-dest", initCodeMount + "/" + gitsource.RepoName(g.URL)}
	if g.Branch != "" {
		args = append(args, "--git-branch", g.Branch)
	}
	if g.Revision != "" {
		args = append(args, "--git-rev", g.Revision)
	}
	return args
}

// addSource makes the init container clone the job's git source into the code volume,
// with the credentials of its Secret, and mounts that volume in the worker container.
func addSource(d *v1.TrainJob, pod *corev1.PodSpec) {
	g, ok := gitSource(d)
	if !ok {
		return
	}
	init := &pod.InitContainers[0]
	init.Command = append(init.Command, cloneArgs(g)...)
	init.VolumeMounts = append(init.VolumeMounts, corev1.VolumeMount{Name: codeVolume, MountPath: initCodeMount})
	// go-git holds a pack in memory while it indexes it.
	init.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
	init.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
	init.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	if name := g.CredentialsSecret; name != "" {
		init.Env = append(init.Env, secretEnv(gitsource.EnvUsername, name, SecretUsernameKey),
			secretEnv(gitsource.EnvPassword, name, SecretPasswordKey))
	}
	worker := &pod.Containers[0]
	worker.WorkingDir = workingDir(d)
	worker.VolumeMounts = append(worker.VolumeMounts, corev1.VolumeMount{Name: codeVolume,
		MountPath: strings.TrimSuffix(worker.WorkingDir, "/") + "/code"})
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: codeVolume,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}
