// Package gang restarts a Kubernetes gang in place: a Coordinator in worker 0's in-pod
// launcher (`trainyard worker`) decides when the gang's attempts start, stop and end, and
// a Member in every worker's launcher (worker 0's too, over loopback) runs the attempts it
// is told to and says how they ended. A rank that fails then costs the gang a new
// rendezvous on the same pods, not new pods.
//
// # Protocol
//
// Members connect to worker 0 on a fixed TCP port (workload.GangPort, next to the
// rendezvous and progress ports) and the two sides exchange newline-delimited JSON, one
// envelope per line: {"mac": "<hex HMAC-SHA256>", "msg": {...}}, at most MaxLine bytes.
//
//	coordinator → member   challenge{nonce}          first, unauthenticated
//	member → coordinator   hello{worker, pod, incarnation, nonce}
//	coordinator → member   welcome{} | refused{reason}
//	coordinator → member   start{attempt}            run attempt A now
//	member → coordinator   ended{attempt, outcome, reason, rank, exitCode}
//	coordinator → member   stop{attempt, reason}     stop attempt A's processes
//	member → coordinator   stopped{attempt}          they are gone
//	coordinator → member   finish{outcome, reason, final, attempt, restarts, disruptions}
//	member → coordinator   leaving{reason}           its pod stops (SIGTERM)
//
// With a secret (TRAINYARD_GANG_SECRET in the pods) every message but the challenge
// carries an HMAC under a key derived from the secret and both sides' nonces, and a
// sequence number per direction: a connection's messages cannot be forged, replayed on
// another connection, reordered or reflected. Without one the MACs are left out; the
// sequence numbers are still checked.
//
// # Attempts
//
// The coordinator starts attempt A only when one member of every worker index 0..N-1 is
// connected; while it waits it says who is missing, for at most Coordinator.JoinWait.
// Before sending start{A} it calls Coordinator.Prepare (worker 0 finishes the previous
// attempt's checkpoint commit there and records A in run.json), so every member resumes
// from the same checkpoint.
//
// When a member reports ended{A, failed|hung}, the coordinator calls Coordinator.Stopping
// (worker 0 closes the rendezvous store's connections), sends stop{A} to every member and
// waits until each confirms stopped{A} (its launcher's teardown: SIGTERM, then
// SIGKILL after the grace period) for at most Coordinator.StopWait; a member that does
// not confirm is dropped (its connection closed; it stops its processes itself and
// connects again). Then, with restarts left (the job's maxRestarts against the run's
// restarts so far), it starts A+1 on the same members; without, it finishes failed with
// Final set, which tells the operator that the job failed for good. When every member
// reports ended{A, succeeded}, it finishes succeeded.
//
// A member whose connection drops, or that says it is leaving (its pod got SIGTERM:
// deleted, evicted, preempted), is lost: the coordinator stops the others and waits, for at
// most Coordinator.ReturnWait, for a member of that worker index to connect again (a
// replaced pod) before A+1. That restart counts as a disruption, as an evicted pod does
// for the operator, not against maxRestarts; so does a rank's failure when a member is
// lost while the gang stops (its ranks' end most likely made the others fail first). A member that loses the coordinator stops
// its processes before it connects again (worker 0's pod may have been replaced), for at
// most Member.ConnectWait. A member only ever says hello with no processes running, so
// two attempts of the gang never overlap.
package gang
