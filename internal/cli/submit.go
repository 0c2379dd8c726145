package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/kubecli"
)

const submitLong = `Submit a training job to a trainyard server, then print its log until it ends, as
'ray job submit' does: trainyard exits 0 when the job succeeded and 1 when it failed or
was stopped. While the job waits for resources, submit says why, on stderr (as
"trainyard: job ID is waiting: needs 2 GPUs, 1 free"), and prints its log once it
starts. With --no-wait it prints the job's ID and returns at once. Ctrl-C stops
printing the log; the job goes on ('trainyard stop ID' stops it).

The job is described by the same flags and job file as 'trainyard run' (see its help),
and checked here before it is sent, then by the server: the script a Python command
runs (python3 train.py) must be in the folder the workers start in, on the server's
machine (or in the folder --working-dir uploads), and with --sync-source a path into
the clone, code/<repo>/train.py; else submit exits 2 and no job is made. The server
runs it when its GPUs, CPU and memory
are free, higher --priority first, under its own 'trainyard run', so it behaves as one
run by hand and outlives the server.

Without --cpus-per-worker (the job file's spec.resources.cpu), the server gives each
worker a default share of its CPU, which the job holds and its workers' OMP_NUM_THREADS
follows: 1 CPU per process for a worker without GPUs (as Ray Train gives each worker 1
CPU), and for a worker with GPUs the machine's cores divided by its GPUs, times the
worker's GPUs, at least 1; never more than the machine's cores divided among the job's
workers. 'trainyard list' shows what each job holds.

Paths are paths on the server's machine. Two flags of near-identical names, from two
ecosystems, say where the workers start; give one of them, not both:

  --workdir DIR       a folder on the server's machine (as docker run's --workdir), by
                      default the folder submit runs in, which must exist there too: the
                      common case is a server on this machine.
  --working-dir DIR   a folder on this machine (as ray job submit's --working-dir): its
                      files and folders are zipped (symbolic links are left out, with a
                      warning) and uploaded to the server (at most 100 MiB zipped), and the
                      workers start in its copy there: for a server elsewhere.

The run's folder is <storage path>/<job ID>, where the storage path is the server's
--storage-path unless the job names one. --name names the job (the NAME that
'trainyard list' shows) and --id chooses its ID; both follow the rule of names: 1 to 45
of a-z, 0-9 and '-', starting with a letter and ending with a letter or digit. A name is
unique among the server's jobs until its job is deleted (another job of that name is
refused), and get, logs, stop and delete take it as well as the ID.` + remoteHelp + kubeHelp + `

On a cluster, submit creates a TrainJob and prints its name without waiting: --name is
its name (else one is generated from the command, such as train-x7k2p), --image the
workers' container image (required: it needs the job's command and torch, not
trainyard), and paths (--workdir, --storage-path) are paths inside the worker
containers. The storage path (default /trainyard/results) should be on a volume
(spec.kubernetes.volumes and volumeMounts in the job file), or checkpoints and logs go
with the pods. The job is checked here, then by the cluster, whose refusals name the
field (exit 2).

Arena's command line works on a cluster, flag for flag: --gpus, --working-dir (there, the
folder in the containers the command runs in, where --sync-source clones code/<repo>),
--priority (the workers' PriorityClass), --selector, --toleration, --annotation, --label,
--data NAME:PATH, --sync-mode git --sync-source URL (credentials from GIT_SYNC_USERNAME and
GIT_SYNC_PASSWORD, kept in a Secret the TrainJob owns; the branch is pinned to its commit
now), and --tensorboard [--logdir DIR]. Without --kube, --sync-source clones into the run
folder, where the workers then start.`

const submitExample = `  trainyard submit -- python3 train.py --epochs 3
  trainyard submit --workers 2 --gpus-per-worker 4 --max-restarts 3 -- python3 train.py
  trainyard submit -f job.yaml --priority 10 --no-wait
  trainyard submit --address http://gpu-box:8265 --working-dir . -- python3 train.py
  ID=$(trainyard submit --no-wait -- python3 train.py) && trainyard logs -f "$ID"
  trainyard submit --kube --name mnist --image pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime \
      --workers 2 --gpus-per-worker 1 -- python3 train.py
  trainyard submit --kube -n team-a -f job.yaml --queue team-a-gpus
  trainyard submit --kube --image IMAGE --workers 2:4 --queue team-a --workload-slices \
      -- python3 train.py
  trainyard submit --kube --name=pytorch-dist --gpus=1 --workers=3 --working-dir=/root \
      --image=IMAGE --sync-mode=git --sync-source=https://git.example.com/team/mnist-pytorch.git \
      --data=training-data:/mnist_data --tensorboard --logdir=/mnist_data/logs \
      -- python /root/code/mnist-pytorch/mnist.py --epochs 10`

// submitOptions are the flags of submit that are not part of the job.
type submitOptions struct {
	id string
	// priority is a number on a trainyard server, a PriorityClass on a cluster (Arena's).
	priority string
	noWait   bool
	// workingDir is a local folder to upload, for the job to start in.
	workingDir string
	// gangGiven is whether the user described the gang (as runOptions.gangGiven).
	gangGiven bool
}

func newSubmitCommand(g *globals) *cobra.Command {
	var (
		flags  jobspec.Flags
		remote remoteOptions
		opts   submitOptions
		kube   kubeOptions
		kjob   kubecli.JobFlags
		output string
	)
	cmd := &cobra.Command{
		Use:     "submit [flags] [--] COMMAND [ARGS...]",
		Short:   "Submit a training job to a trainyard server (or a cluster, --kube)",
		Long:    submitLong,
		Example: submitExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !kube.on && cmd.Flags().Changed("data") {
				return usageError(noDataHere("the server's machine"))
			}
			on, err := kube.enabled()
			if err != nil {
				return err
			}
			if on {
				if cmd.Flags().Changed("output") && kjob.DryRun == "" {
					return usageError(errors.New("-o/--output prints a dry run: give --dry-run=client (or =server) too"))
				}
				if err := arenaMeanings(cmd.Flags(), &flags, &kjob, opts); err != nil {
					return usageError(err)
				}
				return kubeSubmit(cmd.Context(), g, &flags, &kjob, &kube, output, args)
			}
			if cmd.Flags().Changed("id") {
				if err := jobspec.CheckName("--id", opts.id); err != nil {
					return usageError(err)
				}
			}
			fs := cmd.Flags()
			opts.gangGiven = flags.File != "" || fs.Changed("workers") || fs.Changed("procs-per-worker")
			return submitJob(cmd.Context(), g, &flags, &remote, opts, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	flags.Bind(cmd.Flags())
	remote.bind(cmd.Flags())
	cmd.Flags().StringVar(&opts.id, "id", "", "the job's ID, a name: 1 to 45 of a-z, 0-9 and '-', starting with a letter (default: generated, raysubmit_...)")
	cmd.Flags().StringVar(&opts.priority, "priority", "", "pending jobs start highest priority first, a number (default 0); with --kube the\n"+
		"workers' PriorityClass, as Arena's --priority")
	cmd.Flags().Lookup("workdir").Usage = "folder the workers start in: a path on the server's machine (in the containers with --kube), " +
		"as docker run's --workdir (default: this folder); not with --working-dir"
	cmd.Flags().StringVar(&opts.workingDir, "working-dir", "", "local folder to zip and upload for the workers to start in its copy, "+
		"as ray job submit's --working-dir; not with --workdir.\nWith --kube, Arena's: the folder in the containers the workers "+
		"start in, and where --sync-source\nclones code/<repo> (default /root with --sync-source)")
	cmd.Flags().BoolVar(&opts.noWait, "no-wait", false, "print the job's ID and return without waiting for the job")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "with --kube --dry-run: print the objects as yaml or json")
	kube.bind(cmd.Flags())
	kjob.Bind(cmd.Flags())
	kube.only(append(kjob.Names(), "output")...)
	kube.notWith("id")
	groupFlags(cmd,
		flagGroup{"Faults and checkpoints", []string{"max-restarts", "hang-timeout", "pg-timeout", "grace-period",
			"keep-checkpoints", "checkpoint-score", "score-order"}},
		flagGroup{"Code from git", []string{"sync-source", "sync-branch", "sync-rev", "sync-mode", "sync-secret"}},
		flagGroup{"The job server", []string{"address", "token-file", "ca-cert"}},
		flagGroup{"Kubernetes (with --kube)", []string{"kube", "kubeconfig", "context", "namespace", "image", "image-pull-policy",
			"data", "annotation", "label", "node-selector", "selector", "toleration", "queue", "priority-class",
			"service-account", "pod-policy", "tensorboard", "tensorboard-image", "logdir", "dry-run", "output", "show-children"}},
	)
	return cmd
}

// submitJob builds the job from the flags, submits it, and waits for it unless told not
// to.
func submitJob(ctx context.Context, g *globals, flags *jobspec.Flags, remote *remoteOptions, opts submitOptions, command []string) error {
	job, err := remoteJob(flags, command, opts.workingDir != "")
	if err != nil {
		return usageError(err)
	}
	if !opts.gangGiven && job.Spec.WorldSize() == 1 {
		// One plain process, as `trainyard run -- python3 train.py` starts: a Ray Train
		// script in it is Ray's driver, whose fit() leases its gang's GPUs from the server.
		if job.Annotations == nil {
			job.Annotations = map[string]string{}
		}
		job.Annotations[v1.AnnotationGang] = v1.GangImplicit
	}
	c, err := remote.client()
	if err != nil {
		return err
	}
	priority, err := serverPriority(opts.priority)
	if err != nil {
		return usageError(err)
	}
	req := client.SubmitRequest{ID: opts.id, Job: job, Priority: priority}
	if opts.workingDir != "" {
		if req.WorkingDirPackage, err = uploadWorkingDir(ctx, g, c, opts.workingDir); err != nil {
			return failed(err)
		}
	}
	j, err := c.Submit(ctx, req)
	if err != nil {
		return failed(err)
	}
	if opts.noWait {
		_, err := fmt.Fprintln(g.io.Out, j.ID)
		return err
	}
	fmt.Fprintf(g.io.Err, "trainyard: submitted job %s; printing its log until it ends (Ctrl-C stops printing, not the job)\n", j.ID)
	return waitForJob(ctx, g, c, j.ID)
}

// serverPriority reads --priority for a trainyard server: a whole number.
func serverPriority(text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(text)
	if err != nil {
		return 0, fmt.Errorf("--priority %q: on a trainyard server a whole number, higher first (a PriorityClass name is for --kube)", text)
	}
	return n, nil
}

// arenaMeanings gives --priority and --working-dir their Arena meanings on a cluster: the
// workers' PriorityClass, and the folder in the containers they start in.
func arenaMeanings(fs *pflag.FlagSet, flags *jobspec.Flags, kf *kubecli.JobFlags, opts submitOptions) error {
	if opts.priority != "" {
		if kf.PriorityClass != "" && kf.PriorityClass != opts.priority {
			return errors.New("--priority and --priority-class both name the workers' PriorityClass: give one of them")
		}
		kf.PriorityClass = opts.priority
		_ = fs.Set("priority-class", opts.priority) // so that JobFlags sees a flag given
	}
	if fs.Changed("working-dir") {
		if fs.Changed("workdir") && flags.WorkingDir != opts.workingDir {
			return errors.New("--working-dir and --workdir both name the folder the workers start in: give one of them")
		}
		flags.WorkingDir = opts.workingDir
	}
	return nil
}

// uploadWorkingDir zips the local folder dir, uploads it unless the server has it
// already, and returns its URI for SubmitRequest.WorkingDirPackage.
func uploadWorkingDir(ctx context.Context, g *globals, c *client.Client, dir string) (string, error) {
	pkg, err := client.PackDir(dir, func(path string) {
		fmt.Fprintf(g.io.Err, "trainyard: warning: --working-dir: leaving out %s, which is not a regular file or folder (a symbolic link?)\n", path)
	})
	if err != nil {
		return "", usageError(fmt.Errorf("--working-dir: %w", err))
	}
	has, err := c.HasPackage(ctx, pkg.Name)
	if err == nil && !has {
		err = c.UploadPackage(ctx, pkg.Name, pkg.Data)
	}
	if err != nil {
		return "", fmt.Errorf("upload --working-dir %s: %w", dir, err)
	}
	return pkg.URI(), nil
}

// remoteJob builds, defaults and validates the job as run does. The storage path is left
// to the server unless the user named one, and the run is named by the server after the
// job's ID. With upload, the job starts in an uploaded folder, so it must not name one.
func remoteJob(flags *jobspec.Flags, command []string, upload bool) (*v1.TrainJob, error) {
	given, err := flags.Job(command)
	if err != nil {
		return nil, err
	}
	if upload && given.Spec.WorkingDir != "" {
		other := "--workdir " + flags.WorkingDir
		if flags.WorkingDir == "" {
			other = "the job file's spec.workingDir " + given.Spec.WorkingDir
		}
		return nil, fmt.Errorf("--working-dir and %s both say where the workers start: --working-dir uploads a folder of this machine "+
			"(as ray job submit's), --workdir names one on the server's machine (as docker run's); give one of them", other)
	}
	job, err := flags.Resolve(command, jobspec.Env{})
	if err != nil {
		return nil, err
	}
	if given.Spec.StoragePath == "" {
		job.Spec.StoragePath = ""
	}
	job.Spec.RunName = ""
	if _, git := jobspec.GitSource(&job.Spec); upload || (git && given.Spec.WorkingDir == "") {
		// The server says where: the unpacked upload, or the run folder the code is cloned into.
		job.Spec.WorkingDir = ""
	}
	return job, nil
}

// waitForJob says why the job waits while it does, prints its log until it ends and
// returns how it ended: nil when it succeeded, an exit code 1 error otherwise, 130 when
// interrupted.
func waitForJob(ctx context.Context, g *globals, c *client.Client, id string) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, err := waitToStart(ctx, g, c, id)
	if err == nil {
		err = c.Follow(ctx, id, g.io.Out, client.LogOptions{})
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return &exitError{code: ExitInterrupted, err: fmt.Errorf(
			"stopped printing the log of job %s, which goes on: 'trainyard logs -f %s' prints it again, 'trainyard stop %s' stops it", id, id, id)}
	}
	if err != nil {
		return failed(err)
	}
	d, err := c.Get(ctx, id)
	if err != nil {
		return failed(err)
	}
	return jobOutcome(g, d.Job)
}

// jobOutcome says how an ended job went: nil when it succeeded.
func jobOutcome(g *globals, j client.Job) error {
	how := strings.ToLower(string(j.Status))
	if j.Message != "" {
		how += ": " + j.Message
	}
	if j.Status == client.StatusSucceeded {
		_, err := fmt.Fprintf(g.io.Err, "trainyard: job %s %s\n", j.ID, how)
		return err
	}
	return &exitError{code: ExitFailed, err: fmt.Errorf("job %s %s", j.ID, how)}
}
