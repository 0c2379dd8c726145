package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/internal/install"
	"github.com/trainyard/trainyard/internal/kubeconfig"
	"github.com/trainyard/trainyard/internal/operator"
	"github.com/trainyard/trainyard/internal/podpolicy"
	"github.com/trainyard/trainyard/internal/workload"
)

const installLong = `Install the Trainyard operator on a Kubernetes cluster: the TrainJob
CustomResourceDefinition, the operator's namespace, ServiceAccount, ClusterRole and
ClusterRoleBinding, and its Deployment. The manifests are built into this binary, so
nothing is downloaded but the image.

With --watch-namespace the operator runs the TrainJobs of that namespace only, with a
Role and RoleBinding there (and one for its leader election in its own namespace); its
ClusterRole keeps only what is cluster-wide: reading nodes (the GPU check), the
kubernetes EndpointSlice (the API server's addresses), and TokenReviews and
SubjectAccessReviews (its metrics are served over HTTPS on :8443 to those allowed to get
/metrics: bind the ClusterRole trainyard-operator-metrics-reader to Prometheus).

--pod-policy restricted (the default) makes the operator refuse TrainJobs whose pods
would be privileged, use the host's namespaces or folders (hostPath), add capabilities,
or use a ServiceAccount or Secret not labelled trainyard.dev/trainjob-access=true;
--pod-policy off lets whoever may create TrainJobs create any pod. See 'trainyard
operator --help'.

--worker-cpu-per-gpu and --worker-memory-per-gpu (default %s and %s) are what a
worker with GPUs requests per GPU when its TrainJob names no CPU or memory: requests
only, no limits; "0" for none. The job's own values always win.

Objects are applied with server-side apply (field manager "trainyard"), so installing
again updates an installation in place: use it to upgrade, or to change the image. It
waits for the CRD to be established and prints one line per object. --dry-run prints
the manifests as YAML instead and does not contact a cluster
('trainyard install --dry-run | kubectl apply --server-side -f -' does the same install).

The cluster is the one kubectl uses: --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the pod's service account; --context picks a context. Installing
needs cluster-admin (it creates a CRD, a ClusterRole and a ClusterRoleBinding). An
existing namespace is used as it is; one trainyard creates is deleted by 'trainyard
uninstall'.`

const installExample = `  trainyard install
  trainyard install --context kind-dev --image registry.example/trainyard:v0.5.0  # make image
  trainyard install --dry-run > trainyard.yaml`

// installFlags are the flags install and uninstall share.
type installFlags struct {
	kube    kubeconfig.Flags
	opts    install.Options
	dryRun  bool
	timeout time.Duration
}

func (f *installFlags) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	f.kube.BindConnection(fs)
	fs.StringVarP(&f.opts.Namespace, "namespace", "n", install.DefaultNamespace, "the operator's namespace")
	fs.DurationVar(&f.timeout, "timeout", install.DefaultTimeout, "how long to wait for the CRD to be established, or deleted")
}

func newInstallCommand(g *globals) *cobra.Command {
	var f installFlags
	var pullPolicy, policy, rayPullPolicy string
	cmd := &cobra.Command{
		Use:     "install",
		Short:   "Install the Trainyard operator and the TrainJob CRD on a Kubernetes cluster",
		Long:    fmt.Sprintf(installLong, workload.DefaultCPUPerGPU, workload.DefaultMemoryPerGPU),
		Example: installExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.opts.PullPolicy = corev1.PullPolicy(pullPolicy)
			f.opts.PodPolicy = podpolicy.Level(policy)
			f.opts.RayAPI.PullPolicy = corev1.PullPolicy(rayPullPolicy)
			if f.opts.Replicas < 1 {
				return usageError(fmt.Errorf("--replicas %d: must be at least 1", f.opts.Replicas))
			}
			if err := f.opts.Validate(); err != nil {
				return usageError(err)
			}
			if !cmd.Flags().Changed("image") && !install.IsRelease(Version) {
				fmt.Fprintf(g.io.Err, "trainyard: warning: %s is not a release, so it installs %s; "+
					"pass --image to run this build's own image\n", Version, f.opts.Image)
			}
			if f.dryRun {
				data, err := install.RenderYAML(f.opts)
				if err != nil {
					return installExit(cmd.Context(), err)
				}
				_, err = g.io.Out.Write(data)
				return err
			}
			return f.run(cmd.Context(), g, func(ctx context.Context, t install.Target) error {
				if err := t.Install(ctx, f.opts); err != nil {
					return err
				}
				ns := f.opts.Namespace
				_, err := fmt.Fprintf(g.io.Out, "Installed. The operator is starting: kubectl -n %s rollout status deployment/%s\n", ns, install.Name)
				if r := f.opts.RayAPI; err == nil && (r.Image != "" || r.Claim != "") {
					rns := cmp.Or(r.Namespace, "default")
					_, err = fmt.Fprintf(g.io.Out, "Ray's Jobs API: service/%s in %s, port 8265 (kubectl -n %s port-forward service/%s 8265); "+
						"its token: kubectl -n %s get secret %s-token -o jsonpath='{.data.token}' | base64 -d\n",
						install.RayAPIName, rns, rns, install.RayAPIName, rns, install.RayAPIName)
				}
				return err
			})
		},
	}
	f.bind(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the manifests as YAML; do not contact a cluster")
	fs.StringVar(&f.opts.Image, "image", install.DefaultImage(Version), "the trainyard image the operator runs and gives to workers")
	fs.Int32Var(&f.opts.Replicas, "replicas", 1, "operator replicas (one leads; the others stand by)")
	fs.StringVar(&pullPolicy, "image-pull-policy", string(corev1.PullIfNotPresent), "Always, IfNotPresent or Never")
	fs.StringVar(&f.opts.WatchNamespace, "watch-namespace", "", "run the TrainJobs of this namespace only, with a Role there (default: every namespace, a ClusterRole)")
	fs.StringVar(&policy, "pod-policy", string(podpolicy.Default), "restricted: refuse privileged pods, host namespaces and folders, network volumes, added capabilities,\n"+
		"unconfined profiles, and ServiceAccounts and Secrets not labelled trainyard.dev/trainjob-access=true; off: allow anything")
	fs.StringArrayVar(&f.opts.APIServerCIDRs, "api-server-cidr", nil, "where the API server's proxy connects to pods from, for the NetworkPolicies (repeatable;\n"+
		"default: what the operator finds in the EndpointSlice default/kubernetes)")
	fs.StringVar(&f.opts.RoomProbeImage, "room-probe-image", "", "image of the operator's room probes (default: the operator's, "+operator.DefaultRoomProbeImage+"; give the pause image your nodes have where they pull nothing)")
	fs.StringVar(&f.opts.WorkerCPUPerGPU, "worker-cpu-per-gpu", workload.DefaultCPUPerGPU, "CPU a worker with GPUs requests per GPU when its TrainJob names none (\"0\": none)")
	fs.StringVar(&f.opts.WorkerMemoryPerGPU, "worker-memory-per-gpu", workload.DefaultMemoryPerGPU, "memory a worker with GPUs requests per GPU when its TrainJob names none (\"0\": none)")
	bindRayAPI(fs, &f.opts.RayAPI, &rayPullPolicy)
	return cmd
}

// run connects to the cluster the flags name and calls do with it, until SIGINT or
// SIGTERM.
func (f *installFlags) run(ctx context.Context, g *globals, do func(context.Context, install.Target) error) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := f.kube.RESTConfig()
	if err != nil {
		return usageError(err)
	}
	cfg.UserAgent = "trainyard/" + Version
	c, err := install.Connect(ctx, cfg, f.kube.Describe(cfg))
	if err != nil {
		return installExit(ctx, err)
	}
	return installExit(ctx, do(ctx, install.Target{Client: c, Out: g.io.Out, Timeout: f.timeout}))
}

// installExit gives an error of install or uninstall its exit code: 2 for bad flags and
// for an uninstall that needs --yes (nothing was changed), 130 when interrupted, else 1.
func installExit(ctx context.Context, err error) error {
	var optErr *install.OptionError
	var confirm *install.ConfirmError
	var cfgErr *kubeconfig.ConfigError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &optErr), errors.As(err, &confirm), errors.As(err, &cfgErr):
		return usageError(err)
	case ctx.Err() != nil:
		return &exitError{code: ExitInterrupted, err: errors.New("interrupted")}
	}
	return failed(err)
}

// bindRayAPI binds the flags of Ray's Jobs API served in the cluster (install --ray-api-image).
func bindRayAPI(fs *pflag.FlagSet, r *install.RayAPI, pullPolicy *string) {
	fs.StringVar(&r.Image, "ray-api-image", "", "also serve Ray's Jobs API and the dashboard in the cluster (service/"+install.RayAPIName+", port 8265):\n"+
		"trainyard server in a pod of this training image (Python, torch, your packages), whose drivers' gangs run as TrainJobs")
	fs.StringVar(&r.Claim, "ray-api-claim", "", "with --ray-api-image: the PersistentVolumeClaim (ReadWriteMany across nodes) the server, its drivers and\n"+
		"their gangs' workers mount: the server's state, uploaded working folders and runs")
	fs.StringVar(&r.Namespace, "ray-api-namespace", "default", "with --ray-api-image: the namespace of the server and its gangs' TrainJobs")
	fs.StringVar(&r.MountPath, "ray-api-mount", install.DefaultRayAPIMount, "with --ray-api-image: where the claim is mounted, in the server's pod and the workers'")
	fs.StringVar(pullPolicy, "ray-api-image-pull-policy", string(corev1.PullIfNotPresent), "with --ray-api-image: Always, IfNotPresent or Never")
}
