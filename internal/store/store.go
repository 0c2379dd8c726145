package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// DefaultLockTimeout is how long Open waits for another process to release the state file
// when Options.Timeout is zero.
const DefaultLockTimeout = time.Second

// schema is the version of the file's layout (see the package doc), kept in the meta
// bucket; Open refuses a file with another version.
const schema = "1"

// Names of the buckets and keys (see the package doc).
var (
	bucketJobs   = []byte("jobs")
	bucketStatus = []byte("status")
	bucketMeta   = []byte("meta")
	keySchema    = []byte("schema")
)

// Options configure Open. The zero value is ready to use.
type Options struct {
	// Timeout is how long Open waits for another process to release the file before it
	// fails with ErrLocked. Zero means DefaultLockTimeout.
	Timeout time.Duration
}

// Store is the job server's durable job state: one bbolt file, held (locked) by one
// process at a time. Its methods are safe for concurrent use; writes are serialized and
// each is on disk when it returns.
type Store struct {
	db   *bolt.DB
	path string
}

// Open opens the state file at path, creating it (mode 0600) and its missing parent
// folders (0700) if needed. It fails with ErrLocked when another process has the file open
// and does not release it within opts.Timeout.
func Open(path string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open state file: %w", err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open state file %s (waited %s for its lock): %w", path, timeout, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	if err := db.Update(s.initBuckets); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	}
	return s, nil
}

// initBuckets creates the buckets of a new file and checks the layout version of an
// existing one.
func (s *Store) initBuckets(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	switch v := meta.Get(keySchema); {
	case v == nil:
		if err := meta.Put(keySchema, []byte(schema)); err != nil {
			return err
		}
	case string(v) != schema:
		return fmt.Errorf("layout version %q, this trainyard reads %q", v, schema)
	}
	if _, err := tx.CreateBucketIfNotExists(bucketJobs); err != nil {
		return err
	}
	byStatus, err := tx.CreateBucketIfNotExists(bucketStatus)
	if err != nil {
		return err
	}
	for _, st := range statuses() {
		if _, err := byStatus.CreateBucketIfNotExists([]byte(st)); err != nil {
			return err
		}
	}
	return buildNameIndex(tx)
}

// Path returns the state file's path.
func (s *Store) Path() string { return s.path }

// Close releases the file. The store must not be used after.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close state file %s: %w", s.path, err)
	}
	return nil
}
