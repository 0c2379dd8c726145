// Package kubecli is what the trainyard command line does with --kube: submit, list,
// describe, follow the logs of, suspend, delete and measure TrainJobs on a Kubernetes
// cluster, through its API server only (the operator does the rest).
//
// internal/cli keeps the flags and the exit codes; this package connects (Options,
// Cluster), talks to the API server (TrainJobs through a small REST client, pods, nodes
// and events through client-go) and writes the tables. Errors of bad input, for which
// trainyard exits 2, are *InputError; every other error is the cluster's or reaching it.
//
// A TrainJob's logs come from its worker pods (container "worker") and, when the pods
// are gone or the API server cannot reach their kubelet, from the run folder on the job's
// storage volume where this machine has it mounted (or a copy of it, --from).
package kubecli
