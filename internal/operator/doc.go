// Package operator is the Kubernetes operator: the TrainJob reconciler and the manager
// that runs it (leader election, health probes, Prometheus metrics).
package operator
