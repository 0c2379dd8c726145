// Package jobs is the job server's engine: it takes submitted TrainJobs, keeps them in the
// durable store, asks the scheduler which pending jobs fit on this machine, starts each
// started job's gang under its own detached supervisor (a `trainyard run` process), and
// follows the supervisors until they end. Supervisors outlive the server: a restarted
// server re-attaches to the ones still running and settles the ones that ended while it
// was down from their run folders.
//
// The HTTP layer (internal/server) turns requests into calls of Service; nothing here
// knows about HTTP.
package jobs
