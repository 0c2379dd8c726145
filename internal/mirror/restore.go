package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/trainyard/trainyard/internal/bucket"
	"github.com/trainyard/trainyard/internal/checkpoint"
)

// restoring is the prefix of the folder Restore downloads into, in the run folder; a
// leftover of a crash is removed by the next Restore.
const restoring = ".restoring-"

// runFiles are the run's files that Restore brings when the run folder has no record
// (run.json, the first), so that a run continued on another machine goes on as on the
// machine it ran on: its attempts, iterations and time go on counting, and a run that
// succeeded is continued only when asked (--resume).
var runFiles = []string{"run.json", "result.json", "progress.csv"}

// Restore makes the bucket's latest committed checkpoint the run folder's latest, by
// downloading it, unless the run folder has it or a newer one; and brings the run's
// record and results when the run folder has no record. It creates the run folder (0700)
// when missing. It returns the name of the checkpoint it downloaded ("" for none). Call it
// before the run folder is opened (rundir.Open).
func (m *Mirror) Restore(ctx context.Context) (string, error) {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return "", err
	}
	manifests, err := m.remoteManifests(ctx)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.remote = manifests
	m.mu.Unlock()
	remote := latestOf(manifests)
	if err := m.restoreResults(ctx); err != nil {
		return "", err
	}
	if remote == 0 || localLatest(m.dir) >= remote {
		return "", nil
	}
	name := checkpoint.Name(remote)
	if err := m.download(ctx, name, manifests[remote]); err != nil {
		return "", fmt.Errorf("download %s from %s: %w", name, m.store.URI(), err)
	}
	return name, nil
}

// remoteManifests reads the manifests of the checkpoints committed in the bucket. A
// manifest that does not parse, or names another checkpoint, is skipped with a warning.
func (m *Mirror) remoteManifests(ctx context.Context) (map[int]checkpoint.Manifest, error) {
	objs, err := m.store.List(ctx, "checkpoint_")
	if err != nil {
		return nil, err
	}
	manifests := map[int]checkpoint.Manifest{}
	for _, o := range objs {
		name, file, _ := strings.Cut(o.Key, "/")
		index, ok := checkpoint.ParseName(name)
		if ok {
			m.mu.Lock()
			m.highest = max(m.highest, index)
			m.mu.Unlock()
		}
		if file != checkpoint.ManifestName || !ok {
			continue
		}
		data, err := m.store.Get(ctx, o.Key, maxManifest)
		if err != nil {
			return nil, err
		}
		man, err := checkpoint.ParseManifest(data)
		if err == nil && man.Name != name {
			err = fmt.Errorf("it names %s", man.Name)
		}
		if err != nil {
			m.logger.Warn("skipping a checkpoint in the bucket", "checkpoint", name, "err", err)
			continue
		}
		manifests[index] = man
	}
	return manifests, nil
}

// maxManifest bounds a manifest read from the bucket.
const maxManifest = 64 << 20

// localLatest is the highest index of a checkpoint with a manifest in the run folder.
func localLatest(dir string) int {
	entries, _ := os.ReadDir(dir)
	latest := 0
	for _, e := range entries {
		index, ok := checkpoint.ParseName(e.Name())
		if !ok {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, e.Name(), checkpoint.ManifestName)); err == nil {
			latest = max(latest, index)
		}
	}
	return latest
}

// download brings the committed checkpoint name into the run folder: its files into a
// private folder, each checked against the manifest, the manifest last, then the folder
// renamed into place.
func (m *Mirror) download(ctx context.Context, name string, man checkpoint.Manifest) error {
	data, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return err
	}
	if err := removeLeftovers(m.dir); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(m.dir, restoring)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(filesAtOnce)
	for _, f := range man.Files {
		g.Go(func() error { return m.downloadFile(gctx, name, tmp, f) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, checkpoint.ManifestName), data, 0o444); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, name)); err != nil {
		return err
	}
	d, err := os.Open(m.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// downloadFile brings one file of checkpoint name into tmp and checks it.
func (m *Mirror) downloadFile(ctx context.Context, name, tmp string, f checkpoint.File) error {
	dst := filepath.Join(tmp, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := m.store.GetFile(ctx, name+"/"+f.Path, dst, f.Size); err != nil {
		return err
	}
	crc, size, err := checkpoint.FileCRC(dst)
	if err != nil {
		return err
	}
	if size != f.Size || crc != f.CRC32C {
		return fmt.Errorf("%s/%s does not match its manifest (size %d, CRC-32C %s; the manifest says %d, %s): "+
			"it was changed in the bucket after the commit", name, f.Path, size, crc, f.Size, f.CRC32C)
	}
	return os.Chmod(dst, 0o444)
}

// removeLeftovers removes what a Restore that crashed left in the run folder.
func removeLeftovers(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), restoring) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoreResults brings the run's record and results when the run folder has no record,
// and counts them as uploaded.
func (m *Mirror) restoreResults(ctx context.Context) error {
	keys, _, err := pullFiles(ctx, m.store, m.dir, false, func(key string) bool { return slices.Contains(runFiles, key) })
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, key := range keys {
		if info, err := os.Stat(filepath.Join(m.dir, key)); err == nil {
			m.sent[key] = fileStamp{size: info.Size(), mtime: info.ModTime()}
		}
	}
	return nil
}

// Pull brings the run's own files (its record, results, TensorBoard events and logs, not
// its checkpoints) from the bucket into the run folder, when the run folder has no record:
// so that results, logs and tensorboard read a run that ran on another machine. It
// returns false when the bucket has no such run.
func Pull(ctx context.Context, store *bucket.Store, dir string) (bool, error) {
	_, found, err := pullFiles(ctx, store, dir, true, func(key string) bool {
		first, _, _ := strings.Cut(key, "/")
		return !strings.HasPrefix(first, "checkpoint_") && !strings.HasPrefix(path.Base(key), ".")
	})
	return found, err
}

// pullFiles downloads the objects of the run that keep selects into the run folder dir,
// the record (run.json) last, so that a pull cut short leaves none and the next one starts
// over; nothing when dir has a record already (found is then true), or, with needRecord,
// when the bucket has none. It returns the keys it downloaded and whether there is a record.
func pullFiles(ctx context.Context, store *bucket.Store, dir string, needRecord bool, keep func(key string) bool) (keys []string, found bool, err error) {
	if _, err := os.Lstat(filepath.Join(dir, runFiles[0])); err == nil {
		return nil, true, nil
	}
	objs, err := store.List(ctx, "")
	if err != nil {
		return nil, false, err
	}
	var todo []bucket.Object
	var record []bucket.Object
	for _, o := range objs {
		switch {
		case !keep(o.Key) || !fs.ValidPath(o.Key):
		case o.Key == runFiles[0]:
			record = append(record, o)
		default:
			todo = append(todo, o)
		}
	}
	if needRecord && len(record) == 0 {
		return nil, false, nil
	}
	for _, o := range append(todo, record...) {
		dst := filepath.Join(dir, filepath.FromSlash(o.Key))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return keys, false, err
		}
		if err := store.GetFile(ctx, o.Key, dst, o.Size); err != nil {
			return keys, false, err
		}
		keys = append(keys, o.Key)
	}
	return keys, len(record) > 0, nil
}
