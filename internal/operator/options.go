package operator

import "time"

// Options configure the operator's manager.
type Options struct {
	// Image is the trainyard image whose binary the workers' init container copies.
	Image string
	// Namespace limits the operator to one namespace; empty watches all.
	Namespace string
	// MetricsAddr serves Prometheus metrics ("0" turns them off).
	MetricsAddr string
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
	// ProgressInterval is how often the progress of a running attempt's worker 0 is read
	// into the status; 0 means DefaultProgressInterval.
	ProgressInterval time.Duration
}

// Defaults of Options.
const (
	DefaultWorkers = 8
	DefaultQPS     = 100
	DefaultBurst   = 200

	DefaultProgressInterval = 30 * time.Second
)
