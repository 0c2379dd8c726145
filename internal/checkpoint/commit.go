package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/trainyard/trainyard/internal/durable"

	"golang.org/x/sys/unix"
)

// steps are the points of a commit, in order, after which the test hook runs: "taken" is
// Take's; "cleaned" comes only when the files were copied. Steps up to "dirs-synced" can
// fail the commit; after "published" the checkpoint is committed, and failures of the
// remaining steps are logged as warnings.
var steps = []string{"taken", "staged", "synced", "manifest", "dirs-synced", "published", "cleaned", "read-only"}

// commit is one commit in progress.
type commit struct {
	s      *Store
	t      *Taken
	name   string
	index  int
	staged string  // .staging/<name>.<random>, while it exists
	moved  bool    // the taken folder was renamed (not copied) to staged
	files  []File  // the manifest's files, once known
	dirs   []entry // the folders of the checkpoint
	buf    []byte
}

// Commit takes the checkpoint folder src (see Take) and commits it (see CommitTaken).
func (s *Store) Commit(src string, meta Meta) (Info, error) {
	t, err := s.Take(src)
	if err != nil {
		return Info{}, err
	}
	return s.CommitTaken(t, meta)
}

// CommitTaken makes the taken folder t the next committed checkpoint, with meta in its
// manifest, and returns it. It stages the files (a rename on the run folder's filesystem, a
// copy otherwise), syncs and hashes them, writes the manifest and renames the checkpoint
// into place; see the package documentation. When it fails, nothing becomes visible and the
// files are left in t.Dir, which the error names.
func (s *Store) CommitTaken(t *Taken, meta Meta) (Info, error) {
	if err := s.writable("commit checkpoint"); err != nil {
		return Info{}, err
	}
	return s.commitTaken(t, s.reserve(), meta)
}

// commitTaken commits t as the checkpoint with the given (reserved) index.
func (s *Store) commitTaken(t *Taken, index int, meta Meta) (Info, error) {
	start := time.Now()
	c := &commit{s: s, t: t, name: checkpointName(index), index: index, buf: make([]byte, bufSize)}
	meta.Metrics = maps.Clone(meta.Metrics)
	m := Manifest{Version: ManifestVersion, Name: c.name, Index: index, Meta: meta}
	if err := c.prepare(&m); err != nil {
		return Info{}, fmt.Errorf("commit %s: %w", c.name, c.abort(err))
	}
	final, err := c.publish()
	if err != nil {
		return Info{}, fmt.Errorf("commit %s: %w", c.name, c.abort(err))
	}
	c.finish(final)
	var size int64
	for _, f := range m.Files {
		size += f.Size
	}
	s.logger.Info("committed checkpoint", "checkpoint", c.name, "files", len(m.Files), "bytes", size,
		"copied", !c.moved, "took", time.Since(start).Round(time.Millisecond))
	return Info{Name: c.name, Index: index, Dir: final, Manifest: m}, nil
}

// prepare stages the files, syncs and hashes them, and writes the manifest m.
func (c *commit) prepare(m *Manifest) error {
	if err := c.stage(); err != nil {
		return err
	}
	if err := c.s.step("staged"); err != nil {
		return err
	}
	if err := c.syncFiles(); err != nil {
		return err
	}
	if err := c.s.step("synced"); err != nil {
		return err
	}
	m.Files = c.files
	if err := writeManifest(c.staged, *m); err != nil {
		return err
	}
	if err := c.s.step("manifest"); err != nil {
		return err
	}
	for i := len(c.dirs) - 1; i >= 0; i-- {
		if err := durable.Sync(filepath.Join(c.staged, filepath.FromSlash(c.dirs[i].rel))); err != nil {
			return fmt.Errorf("sync folder %s: %w", c.dirs[i].rel, err)
		}
	}
	return c.s.step("dirs-synced")
}

// stage moves the taken folder to .staging, or copies it there when it is on another
// filesystem.
func (c *commit) stage() error {
	if _, err := os.Lstat(c.t.Dir); err != nil {
		return fmt.Errorf("the taken folder %s (handed over as %s) vanished before the commit: %w",
			c.t.Dir, c.t.Src, err)
	}
	staged := filepath.Join(c.s.staging, c.name+"."+randomSuffix())
	from, err := device(c.t.Dir)
	if err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	to, err := device(c.s.staging)
	if err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	if from == to {
		err := durable.RenameNoReplace(c.t.Dir, staged)
		if err == nil {
			c.staged, c.moved = staged, true
			return nil
		}
		if !errors.Is(err, unix.EXDEV) { // EXDEV: another mount of the same filesystem
			return fmt.Errorf("stage: %w", err)
		}
	}
	return c.copy(staged)
}

// syncFiles syncs every staged file. Moved files are read once for their sizes and
// CRC-32Cs; copied ones got them from the copy.
func (c *commit) syncFiles() error {
	if !c.moved {
		for _, f := range c.files {
			if err := durable.Sync(filepath.Join(c.staged, filepath.FromSlash(f.Path))); err != nil {
				return fmt.Errorf("sync %s: %w", f.Path, err)
			}
		}
		return nil
	}
	t, err := listTree(c.staged)
	if err != nil {
		return fmt.Errorf("list files: %w", err)
	}
	c.dirs = t.dirs
	files := slices.DeleteFunc(t.files, func(e entry) bool {
		return e.rel == ManifestName || e.rel == manifestTemp // a stale one; writeManifest replaces it
	})
	for _, e := range files {
		// The disk writes what the training process left dirty while the files are hashed.
		if f, err := os.Open(filepath.Join(c.staged, filepath.FromSlash(e.rel))); err == nil {
			startWriteback(f, 0, 0)
			f.Close()
		}
	}
	for _, e := range files {
		size, crc, err := hashFile(filepath.Join(c.staged, filepath.FromSlash(e.rel)), c.buf, true)
		if err != nil {
			return fmt.Errorf("read %s: %w", e.rel, err)
		}
		c.files = append(c.files, File{Path: e.rel, Size: size, CRC32C: crcHex(crc)})
	}
	return nil
}

// publish renames the staged folder to its final name, never over an existing folder.
func (c *commit) publish() (string, error) {
	final := filepath.Join(c.s.dir, c.name)
	if err := durable.RenameNoReplace(c.staged, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("%s already exists; it was not made by this store", final)
		}
		return "", fmt.Errorf("publish: %w", err)
	}
	c.staged = ""
	return final, nil
}

// finish does what follows publishing; the checkpoint is committed, so failures are
// warnings.
func (c *commit) finish(final string) {
	warn := func(err error) {
		c.s.logger.Warn("checkpoint committed, but a later step failed", "checkpoint", c.name, "err", err)
	}
	if err := durable.Sync(c.s.dir); err != nil {
		warn(fmt.Errorf("sync run folder: %w", err))
	}
	if err := durable.Sync(c.s.staging); err != nil {
		warn(fmt.Errorf("sync %s: %w", StagingDir, err))
	}
	if err := c.s.step("published"); err != nil {
		warn(err)
		return
	}
	if !c.moved {
		if err := os.RemoveAll(c.t.Dir); err != nil {
			warn(fmt.Errorf("remove the copied folder: %w", err))
		}
		if err := c.s.step("cleaned"); err != nil {
			warn(err)
			return
		}
	}
	if err := makeReadOnly(final, c.files); err != nil {
		warn(err)
	}
	if err := c.s.step("read-only"); err != nil {
		warn(err)
	}
}

// abort undoes the staging of a failed commit: moved files go back to the taken folder,
// a partial copy is removed. It returns err, naming where the files are.
func (c *commit) abort(err error) error {
	if c.staged != "" && c.moved {
		_ = os.Remove(filepath.Join(c.staged, ManifestName))
		_ = os.Remove(filepath.Join(c.staged, manifestTemp))
		if rerr := durable.RenameNoReplace(c.staged, c.t.Dir); rerr != nil {
			return fmt.Errorf("%w; moving the files back failed too (%v): they are in %s until the next Open",
				err, rerr, c.staged)
		}
	} else if c.staged != "" {
		if rerr := os.RemoveAll(c.staged); rerr != nil {
			c.s.logger.Warn("cannot remove a failed commit's staged copy", "path", c.staged, "err", rerr)
		}
	}
	c.staged = ""
	if _, serr := os.Lstat(c.t.Dir); serr == nil {
		return fmt.Errorf("%w (the checkpoint's files are kept in %s)", err, c.t.Dir)
	}
	return err
}

// makeReadOnly removes the write permissions of the checkpoint's files.
func makeReadOnly(dir string, files []File) error {
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("make %s read-only: %w", f.Path, err)
		}
		if err := os.Chmod(p, fi.Mode().Perm()&^0o222); err != nil {
			return fmt.Errorf("make %s read-only: %w", f.Path, err)
		}
	}
	return nil
}
