package jobspec

import (
	"os"
	"path/filepath"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/bucket"
)

// StagingEnv names the folder under which the runs of a storage path in object storage
// are kept on this machine while they run (default: ~/.cache/trainyard/storage, or
// $XDG_CACHE_HOME/trainyard/storage).
const StagingEnv = "TRAINYARD_STAGING_DIR"

// LocalStorage is the folder on this machine that holds the runs of the storage path p:
// p itself for a folder; for a bucket (s3://bucket/prefix) the local staging folder
// <staging>/s3/bucket/prefix, whose committed checkpoints and files the run uploads
// (internal/mirror).
func LocalStorage(p string) string {
	u, err := bucket.Parse(p)
	if err != nil {
		return p // a folder; a URI that does not parse is refused by Validate
	}
	return filepath.Join(StagingRoot(), u.Scheme, u.Bucket, filepath.FromSlash(u.Prefix))
}

// StagingRoot is the folder under which runs in object storage are staged (StagingEnv).
func StagingRoot() string {
	if d := os.Getenv(StagingEnv); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = filepath.Join(os.TempDir(), "trainyard-"+username())
	}
	return filepath.Join(cache, "trainyard", "storage")
}

func username() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "user"
}

// RunFolder is the run folder of the job on this machine: <storage path>/<run name>, or
// its staging folder when the storage path is in object storage (LocalStorage).
func RunFolder(s *v1.TrainJobSpec) string {
	return filepath.Join(LocalStorage(s.StoragePath), s.RunName)
}

// InBucket reports whether the storage path p is in object storage.
func InBucket(p string) bool {
	_, err := bucket.Parse(p)
	return err == nil
}
