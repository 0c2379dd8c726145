package operator

import (
	"time"

	"github.com/trainyard/trainyard/internal/podpolicy"
	"github.com/trainyard/trainyard/internal/workload"
)

// Options configure the operator's manager.
type Options struct {
	// Image is the trainyard image whose binary the workers' init container copies.
	Image string
	// Namespace limits the operator to one namespace; empty watches all.
	Namespace string
	// MetricsAddr serves Prometheus metrics ("0" turns them off).
	MetricsAddr string
	// MetricsInsecure serves them over plain HTTP to anyone; by default they are served
	// over HTTPS to those the API server authenticates and allows to get /metrics.
	MetricsInsecure bool
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
	// LeaderElection makes replicas elect one active manager.
	LeaderElection bool
	// LeaderElectionNamespace holds the election's Lease; empty means the namespace the
	// operator runs in.
	LeaderElectionNamespace string
	// Workers is how many TrainJobs are reconciled at once; 0 means DefaultWorkers.
	Workers int
	// QPS and Burst limit the operator's requests to the API server (client-go's own
	// defaults, 5 and 10, would make a thousand jobs wait minutes); 0 means the defaults
	// below.
	QPS   float32
	Burst int
	// PodPolicy is what the operator refuses of a TrainJob's pods; empty means
	// podpolicy.Default (restricted).
	PodPolicy podpolicy.Level
	// OperatorNamespace is the namespace the operator's pod runs in, which the workers'
	// NetworkPolicy admits to worker 0's progress port; empty when it runs elsewhere.
	OperatorNamespace string
	// APIServerCIDRs are the addresses the API server reaches pods from (its proxy), which
	// the NetworkPolicies admit to the progress and TensorBoard ports; empty means those
	// of the kubernetes Service's EndpointSlice, looked up when the operator starts.
	APIServerCIDRs []string
	// ProgressInterval is how often the progress of a running attempt's worker 0 is read
	// into the status; 0 means DefaultProgressInterval.
	ProgressInterval time.Duration
	// ElasticSettle is how long a worker of an elastic gang (spec.minWorkers) stays
	// unschedulable before the gang goes on without it (resize.go); 0 means
	// DefaultElasticSettle.
	ElasticSettle time.Duration
	// RoomProbeImage is the image of the room probes that look for room for the workers an
	// elastic gang went without (room.go); empty means DefaultRoomProbeImage.
	RoomProbeImage string
	// RoomProbePriorityClass is the PriorityClass of the room probes; empty means none:
	// the cluster's default priority. `trainyard install` makes one with preemptionPolicy
	// Never and passes it.
	RoomProbePriorityClass string
	// WorkerPerGPU are the CPU and memory requests per GPU of a worker whose TrainJob
	// names none (a zero amount: no default); nil means workload.DefaultPerGPU().
	WorkerPerGPU *workload.PerGPU
	// GangPlacement is how a gang in no Kueue queue is kept from being placed in part
	// (gangs.go): GangPlacementAuto (the default, ""), GangPlacementOperator or
	// GangPlacementOff.
	GangPlacement string
}

// gangPlacement is GangPlacement, defaulted.
func (o *Options) gangPlacement() string {
	if o.GangPlacement == "" {
		return GangPlacementAuto
	}
	return o.GangPlacement
}

// podPolicy is PodPolicy, defaulted.
func (o *Options) podPolicy() podpolicy.Level {
	if o.PodPolicy == "" {
		return podpolicy.Default
	}
	return o.PodPolicy
}

// perGPU is WorkerPerGPU, defaulted.
func (o *Options) perGPU() workload.PerGPU {
	if o.WorkerPerGPU == nil {
		return workload.DefaultPerGPU()
	}
	return *o.WorkerPerGPU
}

// renderOptions are what every rendering of a job's workers shares: the pods made, the
// pods checked against the pod policy, and the template Kueue counts.
func (o *Options) renderOptions() workload.Options {
	return workload.Options{Image: o.Image, PerGPU: o.perGPU()}
}

// Defaults of Options.
const (
	DefaultWorkers = 8
	DefaultQPS     = 100
	DefaultBurst   = 200

	DefaultProgressInterval = 30 * time.Second
)
