// Package rundir keeps a run's folder, <storage path>/<run name>/: the resolved job spec
// (job.yaml), the record of every attempt and each rank's exit (run.json), and the
// per-rank logs (logs/attempt-N/rank-R.log).
//
// A folder is held by one supervisor at a time (an flock on .lock). Opening the folder of a
// run that already succeeded is refused, so a finished run is never overwritten; the folder
// of a run that failed or was interrupted is continued with new attempts.
//
// Run folders are private to their owner (folders 0700, files 0600) unless the storage
// path has the setgid bit, which shares them with its group read-only (see Perm). A run
// folder that is a symbolic link or another user's is refused (ErrUntrusted), and the
// files inside are reached through an os.Root without following links.
//
// Nobody but root and the job's user may be able to swap a run folder while its job
// runs: Open refuses a storage path that another user could change (ErrUntrustedStorage,
// see CheckStorage) before it creates anything. The Run keeps the folder it opened: its
// OpenRoot gives the other packages of a run (checkpoints, results, TensorBoard events,
// scratch folders) that folder, never its path, and Pinned a path that leads to it for
// code that only takes paths (a git clone). CheckSame, which the launcher calls before
// every attempt, fails (ErrReplaced) when the path no longer leads to that folder (its
// device and inode, ID, also given to the training processes in IDEnv).
//
// When a gang's workers run on several machines that share the folder (pods on
// Kubernetes), worker 0 holds it as above and the others open it as secondaries
// (Options.Secondary): they write only their own ranks' logs.
package rundir
