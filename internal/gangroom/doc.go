// Package gangroom decides, on a Kubernetes cluster without a gang scheduler, which
// TrainJob gangs may make their pods now and which give back the room they hold, so
// that two gangs never split the cluster's room between them and both wait forever.
//
// The scheduler places pods one by one. Two gangs of 3 workers x 1 GPU made at the same
// moment on a node with 4 GPUs end up with 2 GPUs each and a third worker that no node
// can take: neither starts, and both fail when their worker 0 stops waiting. Kueue and
// the scheduler's own gang scheduling (the Workload and PodGroup API) admit or bind a
// gang whole; where neither is there, the operator keeps to these rules, in the spirit of
// the coscheduling plugin's permit timeout:
//
//   - One gang places at a time. A gang makes its pods only while no other gang's pods
//     are being placed (made, but neither bound nor refused by the scheduler yet), so the
//     scheduler never interleaves two gangs.
//   - Gangs go in order: higher priority first, then the older, then by name. A gang waits
//     while a gang ahead of it is ready to start or holds room without being placed. A
//     gang whose pods all wait for room holds nothing and blocks nobody: it may never fit.
//   - Gangs wait only for gangs of their kind: those that need GPUs for each other, those
//     that need none for each other.
//   - A gang the scheduler placed only in part (fewer pods bound than it needs to start,
//     the others unschedulable) gives its room back, all of its pods, at once when a gang
//     ahead of it holds part of the room too (it gives way). The gang first in line keeps
//     its room for the rest for HeadHold (so it gets the room the gangs before it free,
//     as a Kueue queue's head would), any other gang for Hold; then it gives it back
//     (nobody should hold GPUs idle for a gang that cannot start, and its worker 0 would
//     give up after five minutes).
//   - A gang that gave its room back waits: it tries again when room was freed since (a
//     gang ended, was suspended or deleted), or after a back-off that doubles with each
//     give-back, from BackoffMin up to BackoffMax (for room freed by pods that are not
//     gangs').
//
// The pure [Decide] holds these rules as one ordered table ([Rules]); the operator builds
// the [Gang] views from its cache and acts on the [Decision].
package gangroom
