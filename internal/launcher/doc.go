// Package launcher starts a gang of worker processes for a TrainJob, wires the
// torch.distributed environment into each, copies their output to the console and the run's
// log files, and tears the whole gang down when one process fails.
//
// It has three callers that share all of this: `trainyard run` in the foreground, the job
// server's per-job supervisor, and the entrypoint inside each Kubernetes pod. They differ
// only in their Placement: which workers run on this machine, with which GPUs, whether
// each worker is a machine of its own (a pod), and where the rendezvous
// (MASTER_ADDR:MASTER_PORT) is. Local ranks count the processes of a machine, as torchrun's
// count those of a node.
package launcher
