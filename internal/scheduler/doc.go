// Package scheduler decides which queued jobs start on one machine and which
// GPUs each of their workers gets.
//
// It is pure placement logic, modelled on Nomad's scheduler: [Schedule] sees
// an immutable [State] (the node, the jobs running on it, and the time) and
// the queue, and returns a [Decision]. It starts no process, reads no clock
// and keeps no state between calls; the same input always gives the same
// decision, and the input is never modified. [CheckFits] answers a separate
// question, for refusing a job when it is submitted: could the job ever run
// on this machine, even with nothing else running?
//
// # Order and gangs
//
// Jobs are taken by priority, higher first, then by submit order (Seq),
// first come first served; ID breaks any remaining tie, so the decision
// does not depend on the order of the queue slice. A job starts only when
// all its workers fit at once (a gang): Workers x GPUs free GPUs, and
// Workers x CPU and Workers x memory within what the running jobs leave.
// Each worker gets its own GPUs, the lowest free indices first.
//
// Jobs start in that order while they fit. The first job that does not fit
// is the head of the queue: it waits, and it is the only job that reserves
// resources (and, where allowed, preempts; see Preemption below). A job that can never fit (see [CheckFits]) never becomes the
// head and blocks nobody.
//
// # Backfill
//
// Later jobs may still start ahead of the head, as in EASY backfilling
// (Lifka, 1995; Mu'alem and Feitelson, 2001), if they fit now and do not
// delay the head. The head's shadow time is the earliest time at which it
// fits if every running job ends at its expected end, Started + TimeLimit
// (Now for a job already past it, or being stopped). A running job without a time limit may
// run forever, so the computation never counts on it ending. The extra
// resources are what is left at the shadow time once the head is placed. A
// later job that fits now may start if
//
//   - its own time limit is known and it ends by the shadow time, or
//   - it fits within the extra resources, which it then uses up.
//
// Jobs started earlier in the same decision count as running jobs that
// started at Now. With these two rules the head starts no later than its
// shadow time as long as jobs end by their time limits: a backfilled job
// has either ended by then or leaves the head room. Running jobs that end
// early may let the head start sooner; backfilled jobs may then hold it
// back, but never past the shadow time.
//
// # Backfill when the head's start cannot be computed
//
// When the head does not fit even after every job with a time limit has
// ended, it waits for a job without one, and nothing can tell when that will
// be: it may be in a second or never. The shadow time is then unknown, and a
// backfilled job with a time limit is no safer than one without: it could
// still hold the very GPUs the head needs when that job ends. So the first
// rule does not apply, and the second uses what the head can never lack:
// in each resource where the head already fits now, what is free beyond the
// head's need; in each resource where it does not fit now, nothing. A
// waiting 8-GPU job therefore lets CPU-only jobs run while it waits for
// GPUs, as long as the CPU and memory it needs stay free, and keeps every
// free GPU idle for itself. Because running jobs only ever give resources
// back, this guarantee is stronger than the one above: whenever the head
// would have fit without the backfilled jobs, it fits with them.
//
// # One reservation
//
// Only the head reserves resources (classic EASY, not conservative
// backfilling): the second job in line is not protected from backfilled
// jobs, but it becomes the head, and is protected, as soon as the head has
// started. This keeps a decision cheap and predictable, at the cost of
// possibly longer waits for jobs behind the head.
//
// # Preemption
//
// With [State].Preemption set to [PreemptLowerPriority], the head may have
// running jobs stopped to make room for it, as Kueue's preemption
// withinClusterQueue: LowerPriority does, or Slurm's PreemptMode=REQUEUE:
// the preempted job is stopped (its checkpoint saved within its grace
// period, which is the caller's business) and queued again, to resume
// later. Only the head preempts, and only when it fits once
// the chosen jobs are gone, in every resource (GPUs counted by the indices
// they free, CPU, memory); a head that would not fit even with every job of
// lower priority gone preempts nothing, and a job that can never fit is
// never the head. Only jobs of strictly lower priority are preempted, never
// one started in the same decision (it came before the head, so its
// priority is not lower).
//
// The jobs are chosen deterministically, and as few as the head needs:
// candidates are taken in order, those already being stopped first
// ([Running].Preempting: they cost nothing more and are never chosen
// twice), then the lowest priority, then the most recently started (it
// loses the least work), then ID, until the head fits; then each one chosen
// is dropped again, the last first, if the head fits without it (Kueue's
// minimal preemptions). No job kept can then be spared.
//
// The new ones are in [Decision.Preempt]; they, and the jobs already being
// stopped, go on holding their resources until they have stopped, so
// nothing starts on those resources in the meantime. The head's reason
// says what it waits for: "needs 2 GPUs, 0 free; preempting job lo
// (priority 0) to make room". A job being stopped is expected to end now,
// which gives the head a shadow time of now: backfilling may use only what
// is left once the head is placed on what the stopping jobs free, never a
// time window before it, so that a backfilled job cannot take the room made
// for the head. Once the jobs have stopped the head fits, and, first in
// order, starts; the preempted jobs wait in the queue like any other.
//
// # Elastic gangs
//
// A job with [Job].MinWorkers below Workers may run with any number of
// workers in between. It starts with Workers when they fit; otherwise with
// the most that fit (and do not delay the head), once at least MinWorkers
// do and it has waited [State].ElasticSettle since [Job].Queued. While it
// settles it is the head, reserving what fits now, so that later jobs do
// not take it. When not even MinWorkers fit, it waits, and preempts, as a
// job of MinWorkers would.
//
// When no job waits (there is no head), running elastic gangs below their
// most grow into what is free, the highest priority first, then the
// earliest started ([Decision].Resize). A head that needs room shrinks
// running elastic gangs of lower priority toward their MinWorkers, in the
// preemption order, before it preempts anything whole; a gang shrunk to
// its fewest is preempted whole only after every other candidate, and the
// shrinks are undone, the last first, as far as the head allows. A
// shrinking gang ([Running].Resizing, ResizeTo) keeps its resources until
// it has shrunk; the workers it drops count as going away, like a
// preempted job. A gang resizing is neither grown nor shrunk again.
//
// Every job that does not start gets a reason in words in
// [Decision.Waiting], such as "needs 2 GPUs, 1 free" or "waiting behind job
// llama (priority 5, submitted earlier)".
package scheduler
