// Package rundir keeps a run's folder, <storage path>/<run name>/: the resolved job spec
// (job.yaml), the record of every attempt and each rank's exit (run.json), and the
// per-rank logs (logs/attempt-N/rank-R.log).
//
// A folder is held by one supervisor at a time (an flock on .lock). Opening the folder of a
// run that already succeeded is refused, so a finished run is never overwritten; the folder
// of a run that failed or was interrupted is continued with new attempts.
//
// When a gang's workers run on several machines that share the folder (pods on
// Kubernetes), worker 0 holds it as above and the others open it as secondaries
// (Options.Secondary): they write only their own ranks' logs.
package rundir
