package cli

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/install"
	"github.com/trainyard/trainyard/internal/kubeconfig"
	"github.com/trainyard/trainyard/internal/operator"
)

const operatorLong = `Run the Trainyard Kubernetes operator: it runs each TrainJob as a gang of worker
pods and restarts the gang when one fails. It is what the Deployment made by 'trainyard
install' runs; run it by hand against a cluster (with the CRD installed) to develop it.

It serves Prometheus metrics on --metrics-bind-address ("0" turns them off) and /healthz
and /readyz on --health-probe-bind-address. With --leader-elect, replicas elect one
active operator through a Lease in --leader-election-namespace (default: the namespace
it runs in). It logs on stderr, at --log-level info unless told otherwise. SIGINT or
SIGTERM stops it gracefully; TrainJobs keep running.

The cluster is the one kubectl uses: --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the pod's service account (in a cluster).`

func newOperatorCommand(g *globals) *cobra.Command {
	var kube kubeconfig.Flags
	var opts operator.Options
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the Kubernetes operator that runs TrainJobs (what 'trainyard install' deploys)",
		Long:  operatorLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := install.ValidateImage(opts.Image); err != nil {
				return usageError(fmt.Errorf("--image: %w", err))
			}
			for flag, ns := range map[string]string{"--namespace": opts.Namespace, "--leader-election-namespace": opts.LeaderElectionNamespace} {
				if ns == "" {
					continue
				}
				if err := install.ValidateNamespace(ns); err != nil {
					return usageError(fmt.Errorf("%s: %w", flag, err))
				}
			}
			cfg, err := kube.RESTConfig()
			if err != nil {
				return usageError(err)
			}
			cfg.UserAgent = "trainyard-operator/" + Version
			sg := *g
			if !cmd.Flags().Changed("log-level") {
				sg.logLevel = "info" // an operator says what it does
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return failed(operator.Run(ctx, cfg, opts, sg.logger()))
		},
	}
	fs := cmd.Flags()
	kube.BindConnection(fs)
	fs.StringVar(&opts.Image, "image", install.DefaultImage(Version), "the trainyard image whose binary workers' init container copies")
	fs.StringVarP(&opts.Namespace, "namespace", "n", "", "watch TrainJobs in this namespace only (default: every namespace)")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", `address of the Prometheus metrics ("0": none)`)
	fs.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect one active operator among replicas")
	fs.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the election's Lease (default: the operator's)")
	fs.IntVar(&opts.Workers, "concurrent-reconciles", operator.DefaultWorkers, "TrainJobs reconciled at once")
	fs.Float32Var(&opts.QPS, "kube-api-qps", operator.DefaultQPS, "requests per second to the API server, sustained")
	fs.IntVar(&opts.Burst, "kube-api-burst", operator.DefaultBurst, "requests to the API server in a burst")
	fs.DurationVar(&opts.ProgressInterval, "progress-interval", operator.DefaultProgressInterval, "how often a running job's worker 0 is asked for its progress (iteration, metrics, checkpoint)")
	return cmd
}
