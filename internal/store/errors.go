package store

import "errors"

// Errors that callers branch on with errors.Is. The store wraps them with context (the
// job's ID, the file's path), so print the error, compare with errors.Is.
var (
	// ErrNotFound: no job has the ID.
	ErrNotFound = errors.New("job not found")
	// ErrExists: Create was given an ID that a job already has.
	ErrExists = errors.New("job already exists")
	// ErrLocked: another process (another trainyard server) has the state file open.
	ErrLocked = errors.New("another trainyard server uses this state file")
	// ErrInvalid: the job or filter breaks a rule of the store (no ID, an unknown status,
	// a change of ID or Seq).
	ErrInvalid = errors.New("invalid job")
)
