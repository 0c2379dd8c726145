package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/ganglease"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/kubecli"
	"github.com/trainyard/trainyard/internal/kubeconfig"
)

// A job server that runs in a cluster (`trainyard install --ray-api`: Ray's Jobs API
// served in the cluster) runs each submission's entrypoint, Ray's driver, as a process of
// its own pod, as a KubeRay head runs it; the gang a driver's TorchTrainer.fit() starts
// does not fit in that pod, so it runs as a TrainJob: `trainyard run` of the gang, in a
// job of such a server, creates the TrainJob the flags describe, in the training image and
// on the shared volume the server's pod mounts (its run folder at the same path, so the
// driver reads the gang's results as on one machine), streams the workers' logs, and
// ends as the TrainJob does. Stopping it (ray job stop) deletes the TrainJob.

// EnvGangCluster holds, in the environment of a job server that runs in a cluster, where
// its jobs' gangs run: a JSON ClusterGang.
const EnvGangCluster = "TRAINYARD_GANG_CLUSTER"

// ClusterGang is where the gangs of an in-cluster job server's jobs run.
type ClusterGang struct {
	// Namespace of the TrainJobs; Image the workers' (the server's own, the training
	// image); Claim the PersistentVolumeClaim mounted at MountPath in the server's pod
	// and in the workers' (the working folders and the runs).
	Namespace string `json:"namespace"`
	Image     string `json:"image"`
	Claim     string `json:"claim"`
	MountPath string `json:"mountPath"`
	// Job is the server's job the gang belongs to (a label of its TrainJob).
	Job string `json:"job,omitempty"`
}

// EnvJobEnvNames names, for a job's processes, the variables its spec sets (a Ray job's
// runtime_env env_vars): a gang that runs on a cluster gives them to its workers, as a
// gang on one machine inherits them.
const EnvJobEnvNames = "TRAINYARD_JOB_ENV"

// LabelRayJob labels the TrainJob of an in-cluster job server's job with the job's ID.
const LabelRayJob = "trainyard.dev/ray-job"

// clusterGang returns where this run's gang runs when it is the gang of an in-cluster job
// server's job; ok is false otherwise.
func clusterGang() (ClusterGang, bool, error) {
	if os.Getenv(ganglease.EnvSocket) == "" {
		return ClusterGang{}, false, nil
	}
	cg, ok, err := gangClusterFromEnv()
	cg.Job = os.Getenv(ganglease.EnvJob)
	return cg, ok, err
}

// gangClusterFromEnv reads EnvGangCluster: ok is false where it is not set.
func gangClusterFromEnv() (ClusterGang, bool, error) {
	raw, set := os.LookupEnv(EnvGangCluster)
	if !set {
		return ClusterGang{}, false, nil
	}
	var cg ClusterGang
	if err := json.Unmarshal([]byte(raw), &cg); err != nil {
		return cg, false, fmt.Errorf("%s: %w", EnvGangCluster, err)
	}
	if cg.Image == "" || cg.Claim == "" || !filepath.IsAbs(cg.MountPath) {
		return cg, false, fmt.Errorf("%s: give image, claim and an absolute mountPath", EnvGangCluster)
	}
	return cg, true, nil
}

// runOnCluster runs the gang as a TrainJob and follows it to its end.
func runOnCluster(ctx context.Context, g *globals, flags *jobspec.Flags, cg ClusterGang, command []string) error {
	sig := handleSignals(ctx)
	kf, err := clusterJobFlags(cg)
	if err != nil {
		return usageError(err)
	}
	if flags.WorkingDir == "" {
		if wd, err := os.Getwd(); err == nil && strings.HasPrefix(wd, cg.MountPath+"/") {
			flags.WorkingDir = wd // the working folder the server unpacked, on the shared volume
		}
	}
	job, _, err := kubecli.BuildJob(flags, kf, command)
	if err != nil {
		return kubeError(err)
	}
	job.Namespace, job.Spec.RunName = cg.Namespace, job.Name // its folder: <storage path>/<name>, where the driver looks
	job.Labels = map[string]string{LabelRayJob: cg.Job}
	passJobEnv(job)
	c, err := kubecli.Connect(&kubeconfig.Flags{Namespace: cg.Namespace}, "trainyard/"+Version, g.io.Err)
	if err != nil {
		return kubeError(err)
	}
	if err := replaceEnded(sig.ctx, c, job.Name); err != nil {
		return failed(err)
	}
	if _, err := c.Submit(sig.ctx, job, false); err != nil {
		return kubeError(err)
	}
	fmt.Fprintf(g.io.Err, "trainyard: the gang runs as TrainJob %s/%s (%d workers)\n", job.Namespace, job.Name, job.Spec.WorkerCount())
	logs := make(chan error, 1)
	lctx, stopLogs := context.WithCancel(sig.ctx)
	defer stopLogs()
	go func() { logs <- c.Logs(lctx, job.Name, kubecli.LogOptions{Follow: true, Rank: -1}, g.io.Out, g.io.Err) }()
	end, err := waitEnded(sig.ctx, c, job.Name, g.io.Err)
	if err != nil {
		stop, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if derr := c.Delete(stop, job.Name, false, 0); derr != nil {
			fmt.Fprintf(g.io.Err, "trainyard: delete TrainJob %s: %v\n", job.Name, derr)
		}
		return &exitError{code: ExitInterrupted, err: fmt.Errorf("run %s stopped: TrainJob %s deleted", job.Name, job.Name)}
	}
	select { // the last lines
	case <-logs:
	case <-time.After(10 * time.Second):
	}
	if end.Status.Phase != v1.PhaseSucceeded {
		return &exitError{code: ExitFailed, err: fmt.Errorf("run %s failed: %s (TrainJob %s/%s)", job.Name, end.Status.Reason, job.Namespace, job.Name)}
	}
	fmt.Fprintf(g.io.Out, "trainyard: run %s succeeded: %s (TrainJob %s/%s)\n", job.Name, end.Status.Reason, job.Namespace, job.Name)
	return nil
}

// clusterJobFlags are the flags of `submit --kube` that put a gang in the server's image
// with its claim mounted.
func clusterJobFlags(cg ClusterGang) (*kubecli.JobFlags, error) {
	kf := &kubecli.JobFlags{}
	fs := pflag.NewFlagSet("gang", pflag.ContinueOnError)
	kf.Bind(fs)
	for name, value := range map[string]string{"image": cg.Image, "image-pull-policy": "IfNotPresent", "data": cg.Claim + ":" + cg.MountPath} {
		if err := fs.Set(name, value); err != nil {
			return nil, fmt.Errorf("%s: --%s %s: %w", EnvGangCluster, name, value, err)
		}
	}
	return kf, nil
}

// passJobEnv gives the gang's workers the variables of the job this run is a gang of
// (EnvJobEnvNames), those the job file names itself winning.
func passJobEnv(job *v1.TrainJob) {
	for _, name := range strings.Split(os.Getenv(EnvJobEnvNames), ",") {
		value, set := os.LookupEnv(name)
		if name == "" || !set || strings.HasPrefix(name, "TRAINYARD_") || slices.ContainsFunc(job.Spec.Env, func(e v1.EnvVar) bool { return e.Name == name }) {
			continue
		}
		job.Spec.Env = append(job.Spec.Env, v1.EnvVar{Name: name, Value: value})
	}
}

// replaceEnded deletes the TrainJob name when one has ended already (an earlier fit() of
// the same run: the new gang resumes from its checkpoints in the run folder), and waits
// until it is gone; a running one is left, and the create that follows says so.
func replaceEnded(ctx context.Context, c *kubecli.Cluster, name string) error {
	old, err := c.Jobs.Get(ctx, c.Namespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || !old.Status.Phase.Finished() {
		return err
	}
	return c.Delete(ctx, name, true, 2*time.Minute)
}

// waitEnded polls the TrainJob until it has finished, or ctx ends, saying on notes why
// it waits while it does (no room, an image that does not pull).
func waitEnded(ctx context.Context, c *kubecli.Cluster, name string, notes io.Writer) (*v1.TrainJob, error) {
	said := ""
	for {
		job, err := c.GetJob(ctx, name)
		if err == nil && job.Status.Phase.Finished() {
			return job, nil
		}
		if err == nil && job.Status.Phase != v1.PhaseRunning && job.Status.Reason != said {
			said = job.Status.Reason
			fmt.Fprintf(notes, "trainyard: TrainJob %s is %s: %s\n", name, job.Status.Phase, said)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// deleteClusterGangs, for a job server that runs in a cluster (EnvGangCluster), deletes
// the TrainJobs of a job's gangs when the job is deleted (ray job delete); nil elsewhere.
func deleteClusterGangs(log *slog.Logger) func(id string) error {
	cg, ok, err := gangClusterFromEnv()
	if !ok || err != nil {
		return nil
	}
	return func(id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := kubecli.Connect(&kubeconfig.Flags{Namespace: cg.Namespace}, "trainyard/"+Version, io.Discard)
		if err != nil {
			return fmt.Errorf("delete its gangs' TrainJobs: %w", err)
		}
		jobs, err := c.Jobs.List(ctx, cg.Namespace)
		if err != nil {
			return fmt.Errorf("delete its gangs' TrainJobs: %w", err)
		}
		for _, j := range jobs {
			if j.Labels[LabelRayJob] != id {
				continue
			}
			if err := c.Jobs.Delete(ctx, j.Namespace, j.Name, metav1.DeletePropagationBackground); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete its gang's TrainJob %s: %w", j.Name, err)
			}
			log.Info("deleted the TrainJob of a deleted job's gang", "job", id, "trainjob", j.Name)
		}
		return nil
	}
}
