package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/install"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/kubecli"
	"github.com/trainyard/trainyard/internal/workload"
)

// The --kube halves of submit, list, get, stop and delete.

// kubeView is the view of a --kube command's table.
func kubeView(g *globals, output string) kubecli.View {
	return kubecli.View{Out: g.io.Out, Now: time.Now(), Wide: output == "wide"}
}

// kubeSubmit creates a TrainJob from the job file, the flags and the command, and prints
// its name (on stdout, alone) and how to follow it.
func kubeSubmit(ctx context.Context, g *globals, flags *jobspec.Flags, kf *kubecli.JobFlags, k *kubeOptions, output string, command []string) error {
	if err := kf.CheckDryRun(); err != nil {
		return kubeError(err)
	}
	if err := checkOutput(output, "yaml", "json"); err != nil {
		return err
	}
	job, warnings, err := kubecli.BuildJob(flags, kf, command)
	if err != nil {
		return kubeError(err)
	}
	creds := kubecli.TakeCredentials(job, os.Environ())
	var store *kubecli.GitCredentials // the credentials to keep in a Secret of the job's
	if creds != nil && job.Spec.Source.Git.CredentialsSecret == "" {
		store, job.Spec.Source.Git.CredentialsSecret = creds, kubecli.SecretPlaceholder
	}
	if err := kubecli.PinSource(ctx, job, creds); err != nil {
		return kubeError(err)
	}
	if kf.DryRun == kubecli.DryRunClient {
		for _, w := range warnings {
			fmt.Fprintf(g.io.Err, "trainyard: warning: %s\n", w)
		}
		return printFirstAttempt(g, k, job, output, kf.ShowChildren)
	}
	c, err := k.connect(g)
	if err != nil {
		return err
	}
	if err := c.CheckClaims(ctx, job.Namespace, kf); err != nil {
		return kubeError(err)
	}
	access, err := c.CheckAccess(ctx, job, kf)
	if err != nil {
		return kubeError(err)
	}
	warnings = append(warnings, access...)
	if who := c.WhoAmI(ctx); who != "" {
		if job.Annotations == nil {
			job.Annotations = map[string]string{}
		}
		job.Annotations[v1.AnnotationSubmittedBy] = who
	}
	created, err := submitWithSecret(ctx, c, job, store, kf.DryRun == kubecli.DryRunServer)
	if err != nil {
		return kubeError(err)
	}
	for _, w := range warnings {
		fmt.Fprintf(g.io.Err, "trainyard: warning: %s\n", w)
	}
	if kf.DryRun == kubecli.DryRunServer {
		return printData(g.io.Out, output, created)
	}
	if _, err := fmt.Fprintln(g.io.Out, created.Name); err != nil {
		return err
	}
	ns := nsFlag(c, created.Namespace)
	_, err = fmt.Fprintf(g.io.Err, "trainyard: created TrainJob %s in namespace %s; 'trainyard get --kube%s %s' shows it, "+
		"'trainyard logs --kube%s -f %s' follows its log\n", created.Name, created.Namespace, ns, created.Name, ns, created.Name)
	return err
}

// submitWithSecret creates job, and first the Secret of its git credentials when there are
// some: the Secret is made before the job that needs it, owned by the job once the job
// exists, and deleted if the job could not be created.
func submitWithSecret(ctx context.Context, c *kubecli.Cluster, job *v1.TrainJob, creds *kubecli.GitCredentials, dryRun bool) (*v1.TrainJob, error) {
	if creds == nil {
		return c.Submit(ctx, job, dryRun)
	}
	ns := job.Namespace
	if ns == "" {
		ns = c.Namespace
	}
	secret, err := c.CreateGitSecret(ctx, ns, creds, dryRun)
	if err != nil {
		return nil, err
	}
	job.Spec.Source.Git.CredentialsSecret = secret
	created, err := c.Submit(ctx, job, dryRun)
	if dryRun {
		return created, err
	}
	owner := created
	if err != nil {
		owner = job
		owner.Namespace = ns
	}
	if oerr := c.OwnGitSecret(ctx, secret, owner, err == nil); oerr != nil {
		return created, errors.Join(err, oerr)
	}
	return created, err
}

// kubeList prints the TrainJobs of the namespace, or of all, with the node of each one's
// worker 0 (N/A, and a warning, when the pods cannot be listed).
func kubeList(ctx context.Context, g *globals, k *kubeOptions, allNamespaces bool, statuses []string, output string) error {
	if err := checkOutput(output, "wide", "json", "yaml"); err != nil {
		return err
	}
	only, err := kubecli.ParsePhases(statuses)
	if err != nil {
		return kubeError(err)
	}
	c, err := k.connect(g)
	if err != nil {
		return err
	}
	jobs, err := c.ListJobs(ctx, allNamespaces, only...)
	if err != nil {
		return kubeError(err)
	}
	if output == "json" || output == "yaml" {
		return printData(g.io.Out, output, kubecli.JobList(nonNil(jobs)))
	}
	nodes, err := c.WorkerNodes(ctx, jobs, allNamespaces)
	if err != nil {
		fmt.Fprintf(g.io.Err, "trainyard: warning: the NODE column is N/A: cannot list the worker pods: %v\n", err)
	}
	return kubecli.PrintJobs(kubeView(g, output), jobs, nodes, allNamespaces, where(c, allNamespaces))
}

// kubeGet describes one TrainJob: its status, conditions, worker pods and events; with
// podEvents (-e) its pods' events too.
func kubeGet(ctx context.Context, g *globals, k *kubeOptions, name, output string, podEvents bool) error {
	if err := checkOutput(output, "json", "yaml"); err != nil {
		return err
	}
	c, err := k.connect(g)
	if err != nil {
		return err
	}
	if output != "" {
		job, err := c.GetJob(ctx, name)
		if err != nil {
			return kubeError(err)
		}
		return printData(g.io.Out, output, job)
	}
	d, err := c.Describe(ctx, name)
	if err != nil {
		return kubeError(err)
	}
	if podEvents {
		c.AddPodEvents(ctx, d)
	}
	return kubecli.PrintDetail(kubeView(g, output), d)
}

// kubeStop suspends a TrainJob and says how to resume it.
func kubeStop(ctx context.Context, g *globals, k *kubeOptions, name string) error {
	c, err := k.connect(g)
	if err != nil {
		return err
	}
	job, already, err := c.Suspend(ctx, name)
	if err != nil {
		return kubeError(err)
	}
	state := "suspended: the operator stops its running attempt (every worker gets SIGTERM, then SIGKILL after its grace period)"
	if already {
		state = "was suspended already"
	}
	_, err = fmt.Fprintf(g.io.Out, "TrainJob %s %s. Its run folder (logs, checkpoints) stays; resume it from its latest checkpoint with:\n  %s\n",
		job.Name, state, c.ResumeCommand(job.Name))
	return err
}

// kubeDelete deletes a TrainJob, and with wait its pods before it.
func kubeDelete(ctx context.Context, g *globals, k *kubeOptions, name string, wait bool, timeout time.Duration) error {
	c, err := k.connect(g)
	if err != nil {
		return err
	}
	if wait {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	if err := c.Delete(ctx, name, wait, timeout); err != nil {
		return kubeError(err)
	}
	how := "its Jobs, Services and pods are deleted in the background"
	if wait {
		how = "with its Jobs, Services and pods"
	}
	_, err = fmt.Fprintf(g.io.Out, "TrainJob %s deleted (%s); its run folder on the storage volume stays.\n", name, how)
	return err
}

// printFirstAttempt prints job, and with children what the operator creates for its
// first attempt (with a placeholder UID, to read): --dry-run=client, which needs no
// cluster. The namespace is -n's, else the kubeconfig context's (when there is one), else
// "default".
func printFirstAttempt(g *globals, k *kubeOptions, job *v1.TrainJob, output string, children bool) error {
	ns := k.flags.Namespace
	if ns == "" {
		if resolved, err := k.flags.ResolvedNamespace(); err == nil {
			ns = resolved
		} else {
			ns = "default"
		}
	}
	j, a, err := kubecli.RenderFirstAttempt(job, ns, install.DefaultImage(Version))
	if err != nil {
		return kubeError(err)
	}
	objs := []any{j}
	if children {
		objs = append(objs, a.Service)
		for _, p := range a.Pods() {
			objs = append(objs, p)
		}
		r := j.DeepCopy()
		r.UID = kubecli.PlaceholderUID
		if tb, err := workload.RenderTensorBoard(r); err == nil && tb != nil {
			objs = append(objs, tb.Deployment, tb.Service)
		}
	}
	if output == "json" { // one JSON document: a v1 List, as kubectl prints several objects
		return printData(g.io.Out, "json", map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
	}
	for i, obj := range objs {
		if i > 0 {
			if _, err := fmt.Fprintln(g.io.Out, "---"); err != nil {
				return err
			}
		}
		if err := printData(g.io.Out, "yaml", obj); err != nil {
			return err
		}
	}
	return nil
}
