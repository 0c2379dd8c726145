package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainyard/trainyard/internal/filemode"
)

// steps are the points of a commit, in order, after which the test hook runs: "taken" is
// Take's; "cleaned" comes only when the files were copied. Steps up to "dirs-synced" can
// fail the commit; after "published" the checkpoint is committed, and failures of the
// remaining steps are logged as warnings.
var steps = []string{"taken", "staged", "synced", "manifest", "dirs-synced", "published", "cleaned", "read-only"}

// commit is one commit in progress.
type commit struct {
	s         *Store
	t         *Taken
	extra     []*Taken // more folders whose files are merged into t's (SubmitMerged)
	name      string
	index     int
	staging   *dir    // the store's .staging when the commit began
	staged    *dir    // .staging/<name>.<random>, opened, while it exists there
	moved     bool    // the taken folder was renamed (not copied) to staged
	published bool    // the staged folder is the committed checkpoint
	files     []File  // the manifest's files, once known
	dirs      []entry // the folders of the checkpoint
	buf       []byte
	// collisions are the files of extra that the checkpoint already held, not kept.
	collisions []Collision
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
	info, _, err := s.commitMerged([]*Taken{t}, index, meta)
	return info, err
}

// commitMerged commits the taken folders ts, merged into the first, as the checkpoint with
// the given (reserved) index, and returns it with the files of later folders that were not
// kept because an earlier one held them. The later folders are removed once it is
// committed.
func (s *Store) commitMerged(ts []*Taken, index int, meta Meta) (Info, []Collision, error) {
	for _, t := range ts {
		defer t.release()
	}
	start := time.Now()
	c := &commit{s: s, t: ts[0], extra: ts[1:], name: checkpointName(index), index: index, buf: make([]byte, bufSize)}
	defer c.close()
	meta.Metrics = maps.Clone(meta.Metrics)
	m := Manifest{Version: ManifestVersion, Name: c.name, Index: index, Meta: meta}
	if err := c.prepare(&m); err != nil {
		return Info{}, nil, fmt.Errorf("commit %s: %w", c.name, c.abort(err))
	}
	if err := c.publish(); err != nil {
		return Info{}, nil, fmt.Errorf("commit %s: %w", c.name, c.abort(err))
	}
	c.finish()
	var size int64
	for _, f := range m.Files {
		size += f.Size
	}
	s.logger.Info("committed checkpoint", "checkpoint", c.name, "files", len(m.Files), "bytes", size,
		"copied", !c.moved, "merged", len(c.extra), "took", time.Since(start).Round(time.Millisecond))
	return Info{Name: c.name, Index: index, Dir: filepath.Join(s.dir, c.name), Manifest: m}, c.collisions, nil
}

// prepare stages the files, syncs and hashes them, and writes the manifest m.
func (c *commit) prepare(m *Manifest) error {
	if c.t.parent == nil {
		return fmt.Errorf("%s was not taken by this store (Take)", c.t.Dir)
	}
	staging, err := c.s.currentStaging()
	if err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	c.staging = staging
	if err := c.stage(); err != nil {
		return err
	}
	if err := c.s.step("staged"); err != nil {
		return err
	}
	if len(c.extra) > 0 {
		if c.collisions, err = c.mergeShards(); err != nil {
			return err
		}
	}
	if err := c.syncFiles(); err != nil {
		return err
	}
	if err := c.s.step("synced"); err != nil {
		return err
	}
	slices.SortFunc(c.files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	m.Files = c.files
	if err := writeManifest(c.staged, *m); err != nil {
		return err
	}
	if err := c.s.step("manifest"); err != nil {
		return err
	}
	for i := len(c.dirs) - 1; i >= 0; i-- {
		if err := c.staged.syncIn(c.dirs[i].rel); err != nil {
			return fmt.Errorf("sync folder %s: %w", c.dirs[i].rel, err)
		}
	}
	return c.s.step("dirs-synced")
}

// stagedName is the name of the staged folder in .staging, once c.staged is set.
func (c *commit) stagedName() string { return filepath.Base(c.staged.path) }

// stage moves the taken folder to .staging, or copies it there when it is on another
// filesystem.
func (c *commit) stage() error {
	taken, _, err := c.t.parent.openIn(c.t.name)
	if err != nil {
		return fmt.Errorf("the taken folder %s (handed over as %s) vanished before the commit: %w",
			c.t.Dir, c.t.Src, err)
	}
	defer taken.Close()
	staged := c.name + "." + randomSuffix()
	from, err := taken.device()
	if err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	to, err := c.staging.device()
	if err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	if from == to {
		err := rename(c.t.parent, c.t.name, c.staging, staged)
		if err == nil {
			c.moved = true
			return c.openStaged(staged)
		}
		if !errors.Is(err, unix.EXDEV) { // EXDEV: another mount of the same filesystem
			return fmt.Errorf("stage: %w", err)
		}
	}
	return c.copy(taken, staged)
}

// openStaged opens the staged folder name in .staging.
func (c *commit) openStaged(name string) error {
	d, _, err := c.staging.openIn(name)
	if err != nil {
		if c.moved { // put the files back where the error says they are
			_ = rename(c.staging, name, c.t.parent, c.t.name)
		}
		return fmt.Errorf("stage: %w", err)
	}
	c.staged = d
	return nil
}

// syncFiles syncs every staged file. Moved files are read once for their sizes and
// CRC-32Cs; copied ones got them from the copy.
func (c *commit) syncFiles() error {
	if !c.moved {
		for _, f := range c.files {
			if err := c.staged.syncIn(f.Path); err != nil {
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
		if f, err := openRegular(c.staged, e.rel); err == nil {
			startWriteback(f, 0, 0)
			f.Close()
		}
	}
	for _, e := range files {
		size, crc, err := hashFile(c.staged, e.rel, c.buf, true)
		if err != nil {
			return fmt.Errorf("read %s: %w", e.rel, err)
		}
		c.files = append(c.files, File{Path: e.rel, Size: size, CRC32C: crcHex(crc)})
	}
	return nil
}

// publish renames the staged folder to its final name, never over an existing folder.
func (c *commit) publish() error {
	if err := rename(c.staging, c.stagedName(), c.s.run, c.name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists; it was not made by this store", filepath.Join(c.s.dir, c.name))
		}
		return fmt.Errorf("publish: %w", err)
	}
	c.published = true
	return nil
}

// finish does what follows publishing; the checkpoint is committed, so failures are
// warnings.
func (c *commit) finish() {
	warn := func(err error) {
		c.s.logger.Warn("checkpoint committed, but a later step failed", "checkpoint", c.name, "err", err)
	}
	if err := c.s.run.sync(); err != nil {
		warn(fmt.Errorf("sync run folder: %w", err))
	}
	if err := c.staging.sync(); err != nil {
		warn(fmt.Errorf("sync %s: %w", StagingDir, err))
	}
	if err := c.s.step("published"); err != nil {
		warn(err)
		return
	}
	for _, t := range c.extra {
		if err := t.parent.root.RemoveAll(t.name); err != nil {
			warn(fmt.Errorf("remove the merged folder %s: %w", t.Dir, err))
		}
	}
	if !c.moved {
		if err := c.t.parent.root.RemoveAll(c.t.name); err != nil {
			warn(fmt.Errorf("remove the copied folder: %w", err))
		}
		if err := c.s.step("cleaned"); err != nil {
			warn(err)
			return
		}
	}
	if err := makeReadOnly(c.staged, c.files, c.dirs, folderOf(c.s.run.root)); err != nil {
		warn(err)
	}
	if err := c.s.step("read-only"); err != nil {
		warn(err)
	}
}

// abort undoes the staging of a failed commit: moved files go back to the taken folder,
// a partial copy is removed. It returns err, naming where the files are.
func (c *commit) abort(err error) error {
	if c.staged != nil && !c.published {
		name := c.stagedName()
		if c.moved {
			_ = c.staged.root.Remove(ManifestName)
			_ = c.staged.root.Remove(manifestTemp)
			if rerr := rename(c.staging, name, c.t.parent, c.t.name); rerr != nil {
				return fmt.Errorf("%w; moving the files back failed too (%v): they are in %s until the next Open",
					err, rerr, c.staged.path)
			}
		} else if rerr := c.staging.root.RemoveAll(name); rerr != nil {
			c.s.logger.Warn("cannot remove a failed commit's staged copy", "path", c.staged.path, "err", rerr)
		}
	}
	if _, serr := c.t.parent.root.Lstat(c.t.name); serr == nil {
		return fmt.Errorf("%w (the checkpoint's files are kept in %s)", err, c.t.Dir)
	}
	return err
}

// close closes the staged folder.
func (c *commit) close() {
	if c.staged != nil {
		c.staged.Close()
	}
}

// makeReadOnly makes the committed checkpoint as private as its run folder (run is the run
// folder's mode and group): its files lose their write permissions and what group and
// others may not have there (see filemode.ReadOnly), the manifest too, and its folders get
// the run folder's own folder mode, so that they stay private also once copied out of it.
// In a run folder shared with a group (setgid) they also get its group, which a copied
// checkpoint's files would otherwise not have.
func makeReadOnly(d *dir, files []File, dirs []entry, run runFolder) error {
	for _, f := range append(files, File{Path: ManifestName}) {
		file, err := openRegular(d, f.Path)
		if err != nil {
			return fmt.Errorf("make %s read-only: %w", f.Path, err)
		}
		fi, err := file.Stat()
		if err == nil && run.shared() {
			err = file.Chown(-1, run.gid)
		}
		if err == nil {
			err = file.Chmod(filemode.ReadOnly(fi.Mode(), run.mode))
		}
		file.Close()
		if err != nil {
			return fmt.Errorf("make %s read-only: %w", f.Path, err)
		}
	}
	dirMode, _ := filemode.Of(run.mode)
	for _, e := range append([]entry{{rel: "."}}, dirs...) {
		name := filepath.FromSlash(e.rel)
		if run.shared() {
			if err := d.root.Lchown(name, -1, run.gid); err != nil {
				return fmt.Errorf("give folder %s the run folder's group: %w", e.rel, err)
			}
		}
		if err := d.root.Chmod(name, dirMode); err != nil {
			return fmt.Errorf("set the mode of folder %s: %w", e.rel, err)
		}
	}
	return nil
}

// runFolder is what a checkpoint takes from its run folder: its mode and group.
type runFolder struct {
	mode fs.FileMode
	gid  int
}

// shared reports whether the run folder is shared with its group (setgid).
func (r runFolder) shared() bool { return r.mode&fs.ModeSetgid != 0 }

// folderOf returns the mode and group of root's folder, or a private folder's mode when it
// cannot be read.
func folderOf(root *os.Root) runFolder {
	info, err := root.Stat(".")
	if err != nil {
		return runFolder{mode: filemode.Private, gid: -1}
	}
	r := runFolder{mode: info.Mode(), gid: -1}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		r.gid = int(st.Gid)
	}
	if r.gid < 0 {
		r.mode &^= fs.ModeSetgid
	}
	return r
}

// stagingMode is the mode of the staging folder in the run folder root: the run folder's.
func stagingMode(root *os.Root) fs.FileMode {
	dir, _ := filemode.In(root)
	return dir
}
