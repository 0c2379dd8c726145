// Package podworker is the in-pod launcher of the Kubernetes operator (`trainyard worker`):
// one pod of an attempt's Indexed Job runs one worker of the gang, with the launcher that
// `trainyard run` uses, and leaves a workload.Summary in its termination message.
//
// The operator describes the worker in the pod's environment (see internal/workload's
// contract): the TrainJob, the attempt number, the worker's index (the Job's completion
// index) and worker 0's address. Every worker writes its ranks' logs into the run folder on
// the storage path, which the gang's pods share. Worker 0 holds the run folder as
// `trainyard run` does (its lock and run.json) and owns the results and the checkpoint
// commits; the other workers are secondaries (rundir.Options.Secondary,
// reporting.Options.Secondary): they start an attempt when worker 0's coordinator says
// so, resume from the latest committed checkpoint it left, serve the report socket for
// their own ranks, keep their ranks' checkpoint scratch folders in the pod, and write
// nothing else in the run folder.
//
// A worker runs every attempt that worker 0's gang coordinator (internal/gang) starts on
// the gang's pods (launcher.Launcher.RunAttempt, once per attempt): a failed rank restarts
// the gang in place, while restarts are left. The operator restarts the gang on new pods,
// as a new attempt, when a pod is lost.
package podworker
