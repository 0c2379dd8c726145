// Package mirror keeps a run whose storage path is a bucket (s3://bucket/prefix). The run
// works in a staging folder on this machine as any run does (jobspec.LocalStorage): its
// ranks write checkpoints to local disk, and report() returns as soon as the checkpoint is
// committed there. The mirror then uploads it in the background, one checkpoint at a time
// and several files and parts at once, and commits it in the bucket by writing its
// manifest last, with a conditional write (If-None-Match: *), so that:
//
//   - a checkpoint whose files are not all up has no manifest in the bucket, and is never
//     the bucket's latest (Restore skips it; a later upload or Clean removes it);
//   - two runs that upload the same index never both commit it.
//
// The bucket's layout is the run folder's: <prefix>/<run>/checkpoint_NNNNNN/<files> with
// .trainyard-manifest.json, and the run's files (result.json, progress.csv, TensorBoard
// events, job.yaml, console.log, logs/), uploaded every SyncEvery and when the run ends.
//
// Retention applies the run's policy (keep N, by recency or by a score) to the checkpoints
// committed in the bucket after each upload, deleting a checkpoint manifest first, never
// the bucket's latest; the run folder here keeps its own by the same policy. Restore, before the first attempt, downloads the
// bucket's latest committed checkpoint (parallel ranged reads, each file checked against
// the manifest's size and CRC-32C) when this machine has no newer one: a run resumes on
// any machine that reaches the bucket.
//
// The queue of uploads is bounded (queueLen): when the bucket is slower than training,
// the commits behind it wait, and so does report(), rather than filling the disk.
package mirror

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trainyard/trainyard/internal/bucket"
	"github.com/trainyard/trainyard/internal/checkpoint"
)

const (
	// SyncEvery is how often the run's files (results, logs) are uploaded while it runs.
	SyncEvery = 15 * time.Second
	// queueLen bounds the checkpoints waiting to be uploaded.
	queueLen = 2
	// filesAtOnce is how many files of a checkpoint are uploaded at once (each in parts).
	filesAtOnce = 4
	// tries is how often a checkpoint's upload is tried, each request retried by the SDK.
	tries = 3
)

// Mirror uploads one run folder's commits to its place in a bucket. Its methods are safe
// for concurrent use.
type Mirror struct {
	store  *bucket.Store // <prefix>/<run>
	dir    string        // the run folder
	logger *slog.Logger
	notify func(string)

	queue  chan task
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	policy checkpoint.Policy
	id     string // this mirror's claims

	mu     sync.Mutex
	failed []int // the last uploads that failed (maxFailed)
	// highest is the highest index of a checkpoint folder in the bucket, committed or not.
	highest int
	// remote are the manifests of the checkpoints committed in the bucket, by index (read
	// by Restore, added to by uploads); its highest index is the bucket's latest.
	remote map[int]checkpoint.Manifest
	sent   map[string]fileStamp // run files uploaded, as they were then
	// sending guards closed and the queue's closing against Committed's sends.
	sending sync.RWMutex
	closed  bool
}

// task is one item of the queue: a checkpoint to upload; then is called once it is
// committed in the bucket, or not.
type task struct {
	info checkpoint.Info
	then func(committed bool)
}

type fileStamp struct {
	size  int64
	mtime time.Time
}

// Options are the run's retention policy and what a Mirror tells the user and logs.
type Options struct {
	Policy checkpoint.Policy
	Logger *slog.Logger
	Notify func(text string) // Trainyard's messages on the console
}

// New returns the mirror of the run folder dir at store (the run's prefix) and starts its
// uploader; Close stops it.
func New(store *bucket.Store, dir string, opts Options) *Mirror {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Notify == nil {
		opts.Notify = func(string) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mirror{store: store, dir: dir, logger: opts.Logger, notify: opts.Notify,
		queue: make(chan task, queueLen), ctx: ctx, cancel: cancel, done: make(chan struct{}), sent: map[string]fileStamp{},
		policy: opts.Policy, remote: map[int]checkpoint.Manifest{}, id: randomID()}
	go m.run()
	return m
}

// SetNotify sets the function that shows the mirror's messages to the user.
func (m *Mirror) SetNotify(notify func(text string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notify = notify
}

// URI is where the run is kept.
func (m *Mirror) URI() bucket.URI { return m.store.URI() }

// Committed queues the upload of a checkpoint committed in the run folder; then is called
// once the upload ended, with whether the checkpoint is committed in the bucket. It waits
// while the queue is full.
func (m *Mirror) Committed(info checkpoint.Info, then func(committed bool)) {
	m.sending.RLock() // Close does not close the queue meanwhile
	defer m.sending.RUnlock()
	if m.closed {
		then(false)
		return
	}
	select {
	case m.queue <- task{info: info, then: then}:
	case <-m.ctx.Done():
		then(false)
	}
}

// Highest is the highest index of a checkpoint in the bucket when Restore looked,
// committed or not, or uploaded since.
func (m *Mirror) Highest() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.highest
}

// latest is the index of the bucket's latest checkpoint (0 for none).
func (m *Mirror) latest() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return latestOf(m.remote)
}

// randomID names this mirror in its claims: the host, the process and 8 random bytes.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func latestOf(remote map[int]checkpoint.Manifest) int {
	latest := 0
	for i := range remote {
		latest = max(latest, i)
	}
	return latest
}

// run is the uploader: it works through the queue in order, and uploads the run's files
// every SyncEvery.
func (m *Mirror) run() {
	defer close(m.done)
	tick := time.NewTicker(SyncEvery)
	defer tick.Stop()
	for {
		select {
		case t, ok := <-m.queue:
			if !ok {
				return
			}
			m.do(t)
		case <-tick.C:
			if err := m.syncFiles(m.ctx); err != nil {
				m.logger.Warn("upload the run's files", "to", m.store.URI(), "err", err)
			}
		}
	}
}

// StatusFile, in the run folder, says which checkpoints are uploaded: {"uploaded": N,
// "failed": [M, ...]} (indices; the last few failures). Ray's report() with
// checkpoint_upload_mode SYNC waits on it.
const StatusFile = ".trainyard-uploads.json"

// do uploads one checkpoint and then applies the retention policy in the bucket.
func (m *Mirror) do(t task) {
	err := m.uploadWithRetries(t.info)
	m.writeStatus(t.info.Index, err == nil)
	if err == nil {
		m.retain()
	} else {
		latest := m.latest()
		m.mu.Lock()
		notify := m.notify
		m.mu.Unlock()
		prev := "none"
		if latest > 0 {
			prev = checkpoint.Name(latest)
		}
		notify(fmt.Sprintf("warning: %s was not uploaded to %s (%v); the bucket's latest checkpoint stays %s",
			t.info.Name, m.store.URI(), err, prev))
	}
	t.then(err == nil)
}

// uploadWithRetries uploads a checkpoint, trying again after a failure that the SDK's own
// retries did not overcome (the store restarting, say).
func (m *Mirror) uploadWithRetries(info checkpoint.Info) error {
	var err error
	for try := 1; try <= tries; try++ {
		start := time.Now()
		if err = m.upload(m.ctx, info); err == nil {
			m.logger.Info("checkpoint uploaded", "checkpoint", info.Name, "to", m.store.URI(), "took", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if errors.Is(err, bucket.ErrExists) || m.ctx.Err() != nil {
			return err
		}
		m.logger.Warn("checkpoint upload failed", "checkpoint", info.Name, "try", try, "err", err)
		select {
		case <-time.After(time.Duration(try*try) * 2 * time.Second):
		case <-m.ctx.Done():
			return err
		}
	}
	return err
}

// writeStatus records the end of index's upload in StatusFile (replaced whole).
func (m *Mirror) writeStatus(index int, ok bool) {
	m.mu.Lock()
	if !ok {
		m.failed = append(m.failed, index)
		if len(m.failed) > maxFailed {
			m.failed = m.failed[len(m.failed)-maxFailed:]
		}
	}
	// The bucket's latest is the highest index uploaded: retention never deletes it.
	data, _ := json.Marshal(map[string]any{"uploaded": latestOf(m.remote), "failed": m.failed})
	m.mu.Unlock()
	tmp := filepath.Join(m.dir, StatusFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err == nil {
		err = os.Rename(tmp, filepath.Join(m.dir, StatusFile))
		if err != nil {
			m.logger.Warn("record the uploads", "err", err)
		}
	}
}

// maxFailed bounds the failed uploads StatusFile lists.
const maxFailed = 16

// upload claims the checkpoint's index in the bucket, puts its files, then its manifest,
// which commits it.
func (m *Mirror) upload(ctx context.Context, info checkpoint.Info) error {
	if err := m.claim(ctx, info.Name); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(filesAtOnce)
	for _, f := range info.Manifest.Files {
		g.Go(func() error {
			return m.store.PutFile(gctx, info.Name+"/"+f.Path, filepath.Join(info.Dir, filepath.FromSlash(f.Path)))
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	manifest, err := os.ReadFile(filepath.Join(info.Dir, checkpoint.ManifestName))
	if err != nil {
		return fmt.Errorf("read the manifest: %w", err)
	}
	if err := m.store.PutIfAbsent(ctx, info.Name+"/"+checkpoint.ManifestName, manifest); err != nil {
		return err
	}
	m.mu.Lock()
	m.remote[info.Index] = info.Manifest
	m.mu.Unlock()
	return nil
}

// claimName is the object that claims a checkpoint's index for one mirror before its
// files go up (a conditional write), so that two runs of the same name never write into
// the same checkpoint.
const claimName = ".trainyard-claim"

// claim writes name's claim, or finds this mirror's own (a retry).
func (m *Mirror) claim(ctx context.Context, name string) error {
	m.mu.Lock()
	m.highest = max(m.highest, indexOf(name))
	m.mu.Unlock()
	key := name + "/" + claimName
	err := m.store.PutIfAbsent(ctx, key, []byte(m.id))
	if !errors.Is(err, bucket.ErrExists) {
		return err
	}
	if owner, gerr := m.store.Get(ctx, key, 1024); gerr == nil && string(owner) == m.id {
		return nil
	}
	return fmt.Errorf("%s is being uploaded or committed in the bucket already, by another run of the same name: %w", name, err)
}

func indexOf(name string) int {
	i, _ := checkpoint.ParseName(name)
	return i
}

// retain deletes from the bucket the checkpoints the policy does not keep (never the
// latest), manifest first, which uncommits one.
func (m *Mirror) retain() {
	m.mu.Lock()
	infos := make([]checkpoint.Info, 0, len(m.remote))
	for _, i := range slices.Sorted(maps.Keys(m.remote)) {
		infos = append(infos, checkpoint.Info{Name: checkpoint.Name(i), Index: i, Manifest: m.remote[i]})
	}
	m.mu.Unlock()
	for _, name := range m.policy.Drop(infos) {
		if err := m.deleteCheckpoint(m.ctx, name); err != nil {
			m.logger.Warn("delete a checkpoint from the bucket", "checkpoint", name, "err", err)
			continue
		}
		index, _ := checkpoint.ParseName(name)
		m.mu.Lock()
		delete(m.remote, index)
		m.mu.Unlock()
	}
}

func (m *Mirror) deleteCheckpoint(ctx context.Context, name string) error {
	if err := m.store.Delete(ctx, name+"/"+checkpoint.ManifestName); err != nil {
		return err
	}
	objs, err := m.store.List(ctx, name+"/")
	if err != nil {
		return err
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return m.store.Delete(ctx, keys...)
}

// Close waits for the queued uploads (up to ctx's end), uploads the run's files a last
// time, and stops the uploader.
func (m *Mirror) Close(ctx context.Context) error {
	m.sending.Lock()
	if m.closed {
		m.sending.Unlock()
		return nil
	}
	m.closed = true
	close(m.queue)
	m.sending.Unlock()
	select {
	case <-m.done:
	case <-ctx.Done():
		m.cancel()
		<-m.done
		return fmt.Errorf("upload to %s: gave up waiting for the checkpoints' uploads: %w", m.store.URI(), ctx.Err())
	}
	defer m.cancel()
	if err := m.syncFiles(ctx); err != nil {
		return fmt.Errorf("upload the run's files to %s: %w", m.store.URI(), err)
	}
	return nil
}

// syncFiles uploads the run's files that changed since they were last uploaded: every
// regular file of the run folder but its checkpoints and what Trainyard keeps for itself
// (names starting with a dot, the cloned code/).
func (m *Mirror) syncFiles(ctx context.Context) error {
	var changed []string
	stamps := map[string]fileStamp{}
	err := filepath.WalkDir(m.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished while walking
		}
		rel, _ := filepath.Rel(m.dir, path)
		if rel == "." {
			return nil
		}
		name := d.Name()
		_, isCheckpoint := checkpoint.ParseName(name)
		if strings.HasPrefix(name, ".") || (d.IsDir() && (isCheckpoint || rel == "code")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st := fileStamp{size: info.Size(), mtime: info.ModTime()}
		m.mu.Lock()
		old, ok := m.sent[rel]
		m.mu.Unlock()
		if !ok || old != st {
			changed = append(changed, rel)
			stamps[rel] = st
		}
		return nil
	})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(filesAtOnce)
	for _, rel := range changed {
		g.Go(func() error {
			if err := m.store.PutFile(gctx, filepath.ToSlash(rel), filepath.Join(m.dir, rel)); err != nil {
				return err
			}
			m.mu.Lock()
			m.sent[rel] = stamps[rel]
			m.mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}
