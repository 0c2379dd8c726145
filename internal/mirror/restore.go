package mirror

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/trainyard/trainyard/internal/bucket"
	"github.com/trainyard/trainyard/internal/checkpoint"
)

// restoring is the prefix of the folder Restore downloads into, in the run folder; a
// leftover of a crash is removed by the next Restore.
const restoring = ".restoring-"

// resultFiles are the run's files that Restore brings when the run folder has none, so
// that a run resumed on another machine goes on counting its iterations and time.
var resultFiles = []string{"result.json", "progress.csv"}

// Restore makes the bucket's latest committed checkpoint the run folder's latest, by
// downloading it, unless the run folder has it or a newer one; and brings the run's
// results when the run folder has none. It returns the name of the checkpoint it
// downloaded ("" for none). Call it before the run's checkpoints are opened.
func (m *Mirror) Restore(ctx context.Context) (string, error) {
	remote, err := m.remoteLatest(ctx)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.latest = remote
	m.mu.Unlock()
	if err := m.restoreResults(ctx); err != nil {
		return "", err
	}
	if remote == 0 || localLatest(m.dir) >= remote {
		return "", nil
	}
	name := checkpoint.Name(remote)
	if err := m.download(ctx, name); err != nil {
		return "", fmt.Errorf("download %s from %s: %w", name, m.store.URI(), err)
	}
	return name, nil
}

// remoteLatest is the highest index of a checkpoint committed in the bucket (0 for none).
func (m *Mirror) remoteLatest(ctx context.Context) (int, error) {
	objs, err := m.store.List(ctx, "checkpoint_")
	if err != nil {
		return 0, err
	}
	latest := 0
	for _, o := range objs {
		dir, file := path.Split(o.Key)
		if file != checkpoint.ManifestName {
			continue
		}
		if index, ok := checkpoint.ParseName(strings.TrimSuffix(dir, "/")); ok {
			latest = max(latest, index)
		}
	}
	return latest, nil
}

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
func (m *Mirror) download(ctx context.Context, name string) error {
	data, err := m.store.Get(ctx, name+"/"+checkpoint.ManifestName, 64<<20)
	if err != nil {
		return err
	}
	man, err := checkpoint.ParseManifest(data)
	if err != nil {
		return err
	}
	if man.Name != name {
		return fmt.Errorf("its manifest names %s", man.Name)
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

// restoreResults brings the run's results files when the run folder has none.
func (m *Mirror) restoreResults(ctx context.Context) error {
	if _, err := os.Lstat(filepath.Join(m.dir, resultFiles[0])); err == nil {
		return nil
	}
	for _, name := range resultFiles {
		data, err := m.store.Get(ctx, name, 1<<30)
		if errors.Is(err, bucket.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(m.dir, name), data, 0o600); err != nil {
			return err
		}
		m.mu.Lock()
		if info, err := os.Stat(filepath.Join(m.dir, name)); err == nil {
			m.sent[name] = fileStamp{size: info.Size(), mtime: info.ModTime()}
		}
		m.mu.Unlock()
	}
	return nil
}
