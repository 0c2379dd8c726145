// Package jobs is the job server's engine: it takes submitted TrainJobs, keeps them in the
// durable store, asks the scheduler which pending jobs fit on this machine, starts each
// started job's gang under its own detached supervisor (a `trainyard run` process), and
// follows the supervisors until they end. Supervisors outlive the server: a restarted
// server re-attaches to the ones still running and settles the ones that ended while it
// was down from their run folders.
//
// A start records the intent before acting on it: the job's placement (RUNNING, with its
// GPUs) is in the store before its supervisor starts, and the supervisor's pid after. A
// server that dies in between leaves a record that the next one reconciles: it adopts a
// supervisor that runs but was not recorded (found in /proc by its command line), and
// starts one that never started. A supervisor that died without finishing its job
// (SIGKILL, a crash of the machine) leaves a job that is queued again to continue its run
// folder from the latest checkpoint, while its maxRestarts allow (restart.go).
//
// With Config.Preemption lower-priority, a pending job of higher priority that fits only
// once some running jobs of lower priority are gone preempts them (preempt.go): the
// preemption is recorded in each job, then its supervisor gets SIGTERM (its launcher
// gives the ranks the grace period to save a checkpoint), and when the supervisor has
// ended the job is queued again, to resume in the same run folder from its latest
// checkpoint, counted as a preemption, not a restart.
//
// A running job's own process may lease GPUs for a gang it starts (a Ray Train driver's
// fit()) through the lease socket (lease.go, package ganglease): the scheduler queues the
// gang with the pending jobs, and its GPUs are recorded before they are handed over and
// freed when the lease's connection closes.
//
// The HTTP layer (internal/server) turns requests into calls of Service; nothing here
// knows about HTTP.
package jobs
