package upload

import (
	"errors"
	"fmt"
)

// Limits bounds what an upload may hold. A field that is zero or negative takes its value
// from DefaultLimits, so the zero Limits is the default.
type Limits struct {
	// MaxArchiveBytes is the largest archive, in bytes, that Put keeps and Extract opens.
	MaxArchiveBytes int64
	// MaxTotalBytes is the most bytes that the archive's files may hold once unpacked.
	MaxTotalBytes int64
	// MaxFiles is the most files and folders an archive may unpack to, counting the
	// folders that entry names imply without entries of their own.
	MaxFiles int
}

// DefaultLimits returns the limits Trainyard uses unless told otherwise: 100 MiB of
// archive (Ray's own limit on a package), 1 GiB unpacked, and 10,000 entries.
func DefaultLimits() Limits {
	return Limits{MaxArchiveBytes: 100 << 20, MaxTotalBytes: 1 << 30, MaxFiles: 10_000}
}

// withDefaults returns l with its unset fields taken from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes = d.MaxArchiveBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	return l
}

// Kinds of refusal, for callers to branch on with errors.Is (and map to HTTP statuses).
var (
	// ErrTooLarge: an archive, or what it unpacks to, is over a limit (HTTP 413).
	ErrTooLarge = errors.New("package too large")
	// ErrInvalidName: a package name is not one that ValidName allows (HTTP 400).
	ErrInvalidName = errors.New("invalid package name")
	// ErrBadArchive: an archive is not a zip file, is damaged, or holds an entry that
	// Extract refuses (HTTP 400).
	ErrBadArchive = errors.New("invalid package archive")
)

// refusal is an error of one of the kinds above, with a message of its own.
type refusal struct {
	kind error
	msg  string
}

func (e *refusal) Error() string { return e.msg }

// Is makes errors.Is(err, kind) true for the refusal's kind.
func (e *refusal) Is(target error) bool { return target == e.kind }

// refuse returns a refusal of the given kind with a formatted message.
func refuse(kind error, format string, args ...any) error {
	return &refusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}
