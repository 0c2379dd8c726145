package server

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/units"
	"github.com/trainyard/trainyard/internal/upload"
)

// DefaultUploadQuota is the most bytes that uploaded packages and the working folders
// unpacked from them may take in the state folder unless told otherwise: 20 GiB.
const DefaultUploadQuota = 20 << 30

// packageIdle is how long a stored package must have gone unused (neither uploaded nor
// unpacked) before the quota may remove it to make room. Ray's clients ask whether a
// package exists just before they submit a job that names it, and upload it again when
// it does not; Ray itself keeps a package no job uses for 10 minutes
// (RAY_RUNTIME_ENV_TEMPORARY_REFERENCE_EXPIRATION_S).
const packageIdle = 10 * time.Minute

// errQuota: the upload quota has no room for what a request would write (HTTP 507).
var errQuota = errors.New("upload quota full")

// uploadQuota counts the bytes that uploads take on disk, stored packages and the
// working folders unpacked from them (each submission unpacks its own copy, which its
// job may change), against a limit. What would pass it is refused until jobs are deleted
// (their folders go with them) or stored packages are idle long enough to be removed.
// Its methods are safe for concurrent use.
type uploadQuota struct {
	limit int64
	store *upload.Store
	log   *slog.Logger
	now   func() time.Time

	mu       sync.Mutex
	used     int64            // packages, folders and reservations
	packages map[string]int64 // stored packages' sizes, by name
	folders  map[string]int64 // bytes unpacked into each working folder, by path
}

// newUploadQuota returns a quota of limit bytes (0: DefaultUploadQuota) that counts what
// the store and the working folders under workdirs hold now, the files a job wrote
// into its folder too.
func newUploadQuota(limit int64, store *upload.Store, workdirs string, log *slog.Logger) (*uploadQuota, error) {
	if limit <= 0 {
		limit = DefaultUploadQuota
	}
	q := &uploadQuota{limit: limit, store: store, log: log, now: time.Now,
		packages: map[string]int64{}, folders: map[string]int64{}}
	pkgs, err := store.List()
	if err != nil {
		return nil, err
	}
	for _, p := range pkgs {
		q.packages[p.Name] = p.Size
		q.used += p.Size
	}
	tops, err := os.ReadDir(workdirs)
	if err != nil {
		return nil, fmt.Errorf("count the working folders: %w", err)
	}
	for _, top := range tops {
		dir := filepath.Join(workdirs, top.Name())
		q.folders[dir] = diskUsage(dir)
		q.used += q.folders[dir]
	}
	return q, nil
}

// diskUsage returns the bytes of the regular files in the tree at dir, as far as it can
// read it.
func diskUsage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// quotaBytes writes a size as the quota's messages do: 512B, 1.5MiB, 20GiB.
func quotaBytes(n int64) string { return units.BytesIEC(n) + "B" }

// reservation is room set aside in the quota for something about to be written.
type reservation struct {
	q *uploadQuota
	n int64
}

// reserve sets n bytes aside for what, removing idle packages to make room if it must,
// or refuses with errQuota.
func (q *uploadQuota) reserve(n int64, what string) (*reservation, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.used+n > q.limit {
		q.removeIdle(q.used + n - q.limit)
	}
	if q.used+n > q.limit {
		q.log.Warn("upload quota full: refused", "what", what, "bytes", n, "used", q.used, "quota", q.limit)
		return nil, refuse(errQuota, "the server's upload quota is full: %s would take %s, and uploaded packages and the working "+
			"folders unpacked from them take %s of at most %s (trainyard server --upload-quota); delete ended jobs that "+
			"started from a package (trainyard delete, or DELETE /api/jobs/<id>) to free their folders",
			what, quotaBytes(n), quotaBytes(q.used), quotaBytes(q.limit))
	}
	q.used += n
	return &reservation{q: q, n: n}, nil
}

// removeIdle removes stored packages unused for packageIdle, least recently used first,
// until need bytes are free or none is left; q.mu is held.
func (q *uploadQuota) removeIdle(need int64) {
	pkgs, err := q.store.List()
	if err != nil {
		q.log.Warn("upload quota: list packages", "err", err)
		return
	}
	slices.SortFunc(pkgs, func(a, b upload.Info) int { return a.Used.Compare(b.Used) })
	for _, p := range pkgs {
		if need <= 0 || q.now().Sub(p.Used) < packageIdle {
			return
		}
		if err := q.store.Remove(p.Name); err != nil {
			q.log.Warn("upload quota: remove an idle package", "package", p.Name, "err", err)
			continue
		}
		q.log.Info("upload quota: removed a package unused since "+p.Used.Format(time.RFC3339), "package", p.Name, "bytes", p.Size)
		q.used -= q.packages[p.Name]
		need -= q.packages[p.Name]
		delete(q.packages, p.Name)
	}
}

// cancel gives the reserved bytes back: nothing was written.
func (r *reservation) cancel() {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	r.q.used -= r.n
}

// keepPackage turns the reservation into the stored package name of size bytes, which
// replaced any package of that name.
func (r *reservation) keepPackage(name string, size int64) {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	r.q.used += size - r.n - r.q.packages[name]
	r.q.packages[name] = size
}

// keepFolder turns the reservation into the working folder dir.
func (r *reservation) keepFolder(dir string) {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	r.q.folders[dir] += r.n
}

// forgetFolder gives back what the working folder dir was counted for; it was removed.
func (q *uploadQuota) forgetFolder(dir string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used -= q.folders[dir]
	delete(q.folders, dir)
}

// touch marks the package name used now, so that it is not idle.
func (q *uploadQuota) touch(name string) {
	q.mu.Lock()
	now := q.now()
	q.mu.Unlock()
	if err := q.store.Touch(name, now); err != nil {
		q.log.Warn("upload quota: mark a package used", "package", name, "err", err)
	}
}
