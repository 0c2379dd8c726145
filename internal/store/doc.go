// Package store keeps the job server's jobs in one file, so that a server killed with
// SIGKILL (or a machine that loses power) loses no submitted job and no status change it
// reported: every Create, Update and Delete returns only after its transaction is on disk.
//
// # Why bbolt
//
// The file is a bbolt database (go.etcd.io/bbolt), a B+tree with ACID transactions:
//
//   - it is pure Go, so the trainyard binary stays static with CGO_ENABLED=0 and can be
//     copied into any image;
//   - the state is one file, with no server to run beside trainyard;
//   - a write transaction is committed with fsync before it returns (copy-on-write pages,
//     then the meta page), so a crash leaves either the old or the new state, never a
//     half-written one, and opening the file needs no recovery step;
//   - the file is locked (flock) while open, so a second server on the same file is refused
//     with ErrLocked instead of corrupting it.
//
// SQLite through modernc.org/sqlite would be pure Go too, but it is about ten times the
// code and binary size, for what are key-value needs: jobs by ID and by status.
//
// # Layout
//
// Bucket "jobs" maps a job's ID to its record: the job as JSON without its spec and runtime
// env, followed by those two as the caller gave them, so reading a job parses a few hundred
// bytes of JSON and copies the spec instead of parsing it. Bucket "status" holds one bucket per
// Status that maps the job's Seq (8 bytes, big-endian, so keys sort in submit order) to its
// ID: List reads only the statuses it is asked for, already in Seq order, so listing the
// pending jobs costs the same with 10 or 100,000 finished jobs beside them. Bucket "names"
// indexes the jobs that have a Name (the name, a zero byte, the ID), for ByName and
// CreateUnique; Open rebuilds it from the records. Bucket "meta" holds the layout's
// version. Seq comes from the jobs bucket's sequence, which is kept in the file and never
// goes back, so a deleted job's Seq is not reused.
//
// The store does not interpret Job.Spec or decide which status changes are allowed; that is
// the server's job. Update runs the caller's change inside the write transaction, so
// read-modify-write is atomic; Job.Version lets an API client do the same across requests
// (optimistic concurrency).
package store
