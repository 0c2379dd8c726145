package cli

import (
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trainyard/trainyard/internal/install"
	"github.com/trainyard/trainyard/internal/kubeconfig"
	"github.com/trainyard/trainyard/internal/operator"
	"github.com/trainyard/trainyard/internal/podpolicy"
	"github.com/trainyard/trainyard/internal/workload"
)

// serviceAccountNamespace is the file that holds the namespace of a pod's ServiceAccount.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// podNamespace is the namespace the operator's pod runs in (empty outside a pod), which
// the workers' NetworkPolicy admits to their progress port.
func podNamespace() string {
	data, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

const operatorLong = `Run the Trainyard Kubernetes operator: it runs each TrainJob as a gang of worker
pods and restarts the gang when one fails. It is what the Deployment made by 'trainyard
install' runs; run it by hand against a cluster (with the CRD installed) to develop it.

It serves Prometheus metrics on --metrics-bind-address ("0" turns them off) over HTTPS
to those the API server authenticates and allows to get /metrics (--metrics-secure=false:
plain HTTP to anyone), and /healthz and /readyz on --health-probe-bind-address.

Its pod policy (--pod-policy, default restricted) refuses TrainJobs whose pods would be
privileged, share the host's namespaces, mount host folders (hostPath), add capabilities
beyond the container runtime's defaults, or run as a ServiceAccount or read a Secret that
does not allow it (label trainyard.dev/trainjob-access=true; the default ServiceAccount
and Secrets the TrainJob owns are allowed): such a job fails, its condition and Event
naming the fields, and nothing is created. --pod-policy=off, an administrator's choice,
lets whoever may create TrainJobs create any pod. Every job's workers get a
NetworkPolicy that admits the gang's own pods, and on the progress port the operator's
pod and the API server (--api-server-cidr, default the addresses of the kubernetes
Service's EndpointSlice).

A worker with GPUs whose TrainJob names no CPU (spec.resources.cpu, submit's
--cpus-per-worker) requests --worker-cpu-per-gpu for each GPU, and one that names no
memory requests --worker-memory-per-gpu for each GPU (default %s CPUs and %s): requests
only, no limits, so the worker is Burstable instead of BestEffort (the first evicted)
and is never throttled or OOM-killed at a limit it did not ask for. "0" gives no
default; what the job asks for (or its pod template's requests and limits) always wins,
and workers without GPUs get none.

A gang is placed whole, never in part (--gang-placement auto): where the cluster serves
the scheduler's gang scheduling (scheduling.k8s.io/v1beta1 PodGroups: Kubernetes 1.35+
with the GenericWorkload feature gate), each attempt's pods form a PodGroup the scheduler
binds together; elsewhere the operator places one gang at a time, higher priority then
older first, and a gang the scheduler placed in part gives its pods' room back to a gang
ahead of it, or after 15s without room for the rest, and tries again when a gang ends
(status condition WaitingForRoom says why). Gangs in a Kueue queue are admitted whole by
Kueue instead. --gang-placement operator uses the operator's rules even with PodGroups;
off leaves each pod to the scheduler.

With --leader-elect, replicas elect one active operator through a Lease in
--leader-election-namespace (default: the namespace it runs in). It logs on stderr, at
--log-level info unless told otherwise. SIGINT or SIGTERM stops it gracefully;
TrainJobs keep running.

The cluster is the one kubectl uses: --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the pod's service account (in a cluster).`

func newOperatorCommand(g *globals) *cobra.Command {
	var kube kubeconfig.Flags
	var opts operator.Options
	var policy, cpuPerGPU, memoryPerGPU string
	secureMetrics := true
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the Kubernetes operator that runs TrainJobs (what 'trainyard install' deploys)",
		Long:  fmt.Sprintf(operatorLong, workload.DefaultCPUPerGPU, workload.DefaultMemoryPerGPU),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := install.ValidateImage(opts.Image); err != nil {
				return usageError(fmt.Errorf("--image: %w", err))
			}
			if err := install.ValidateImage(opts.RoomProbeImage); err != nil {
				return usageError(fmt.Errorf("--room-probe-image: %w", err))
			}
			if c := opts.RoomProbePriorityClass; c != "" {
				if errs := validation.IsDNS1123Subdomain(c); len(errs) > 0 {
					return usageError(fmt.Errorf("--room-probe-priority-class %q: not a PriorityClass name: %s", c, strings.Join(errs, "; ")))
				}
			}
			level, err := podpolicy.ParseLevel(policy)
			if err != nil {
				return usageError(fmt.Errorf("--pod-policy: %w", err))
			}
			opts.PodPolicy = level
			if !slices.Contains(operator.GangPlacements, opts.GangPlacement) {
				return usageError(fmt.Errorf("--gang-placement %q: give one of %s", opts.GangPlacement, strings.Join(operator.GangPlacements, ", ")))
			}
			if opts.ElasticSettle < 0 {
				return usageError(fmt.Errorf("--elastic-settle %s: give a duration of 0 or more, such as 30s (0: the default, %s)",
					opts.ElasticSettle, operator.DefaultElasticSettle))
			}
			for _, cidr := range opts.APIServerCIDRs {
				if _, err := netip.ParsePrefix(cidr); err != nil {
					return usageError(fmt.Errorf("--api-server-cidr %q: not a CIDR such as 10.0.0.1/32", cidr))
				}
			}
			perGPU, err := parsePerGPU(cpuPerGPU, memoryPerGPU)
			if err != nil {
				return usageError(err)
			}
			opts.WorkerPerGPU = &perGPU
			opts.MetricsInsecure = !secureMetrics
			opts.OperatorNamespace = podNamespace()
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
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8443", `address of the Prometheus metrics ("0": none)`)
	fs.BoolVar(&secureMetrics, "metrics-secure", true, "serve metrics over HTTPS to those the API server authenticates and allows to get /metrics; false: plain HTTP to anyone")
	fs.StringVar(&policy, "pod-policy", string(podpolicy.Default), "what TrainJobs' pods may not do: restricted (no privileged containers, host namespaces, hostPath\n"+
		"or network volumes, added capabilities, unconfined profiles, or ServiceAccounts and Secrets not labelled\n"+
		"trainyard.dev/trainjob-access=true) or off")
	fs.StringArrayVar(&opts.APIServerCIDRs, "api-server-cidr", nil, "where the API server's proxy connects to pods from, admitted by the NetworkPolicies (repeatable;\n"+
		"default: the addresses of the EndpointSlice default/kubernetes)")
	fs.StringVar(&cpuPerGPU, "worker-cpu-per-gpu", workload.DefaultCPUPerGPU, "CPU a worker with GPUs requests per GPU when its TrainJob names none (a request, no limit; \"0\": none)")
	fs.StringVar(&memoryPerGPU, "worker-memory-per-gpu", workload.DefaultMemoryPerGPU, "memory a worker with GPUs requests per GPU when its TrainJob names none (a request, no limit; \"0\": none)")
	fs.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect one active operator among replicas")
	fs.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the election's Lease (default: the operator's)")
	fs.IntVar(&opts.Workers, "concurrent-reconciles", operator.DefaultWorkers, "TrainJobs reconciled at once")
	fs.Float32Var(&opts.QPS, "kube-api-qps", operator.DefaultQPS, "requests per second to the API server, sustained")
	fs.IntVar(&opts.Burst, "kube-api-burst", operator.DefaultBurst, "requests to the API server in a burst")
	fs.DurationVar(&opts.ElasticSettle, "elastic-settle", operator.DefaultElasticSettle, "how long a worker of an elastic TrainJob (spec.minWorkers) stays unschedulable (its node lost, no room) "+
		"before the gang restarts without it at the smaller size, from its latest checkpoint (the job server's --elastic-settle)")
	fs.StringVar(&opts.RoomProbeImage, "room-probe-image", operator.DefaultRoomProbeImage, "image of the room probes: pods shaped like a worker, running only this image, "+
		"that ask the scheduler whether there is room again for the workers an elastic TrainJob went without (the pause image nodes already have)")
	fs.StringVar(&opts.RoomProbePriorityClass, "room-probe-priority-class", "", "PriorityClass of the room probes (default: none, the "+
		"cluster's default priority); 'trainyard install' makes trainyard-operator-room-probe, with preemptionPolicy Never, and passes it")
	fs.StringVar(&opts.GangPlacement, "gang-placement", operator.GangPlacementAuto, "how a gang in no Kueue queue is kept from holding part of the room it needs: auto (PodGroups where\n"+
		"the cluster serves them, else the operator's rules), operator (its rules always) or off (each pod on its own)")
	fs.DurationVar(&opts.ProgressInterval, "progress-interval", operator.DefaultProgressInterval, "how often a running job's worker 0 is asked for its progress (iteration, metrics, checkpoint)")
	return cmd
}

// parsePerGPU parses the operator's --worker-cpu-per-gpu and --worker-memory-per-gpu.
func parsePerGPU(cpu, memory string) (workload.PerGPU, error) {
	var out workload.PerGPU
	var err error
	if out.CPU, err = workload.ParseCPUPerGPU(cpu); err != nil {
		return out, fmt.Errorf("--worker-cpu-per-gpu: %w", err)
	}
	if out.Memory, err = workload.ParseMemoryPerGPU(memory); err != nil {
		return out, fmt.Errorf("--worker-memory-per-gpu: %w", err)
	}
	return out, nil
}
