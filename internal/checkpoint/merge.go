package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Collision is a file that more than one taken folder of a merged checkpoint held: the
// first folder's copy (the lowest rank's) is kept, the others are not.
type Collision struct {
	Path    string // slash-separated, relative to the checkpoint
	Dropped int    // the index, in the shards given to SubmitMerged, of the folder whose copy was not kept
}

// Reserve reserves the index, and so the name, of a checkpoint whose folders are handed
// over one by one (SubmitMerged commits it). An index reserved and never submitted
// leaves a gap in the numbering, nothing more.
func (c *Committer) Reserve() (string, int) {
	index := c.store.reserve()
	return checkpointName(index), index
}

// OnCollision sets a function called, from the committing goroutine, with the files of
// a merged checkpoint that several of its folders held, once the checkpoint is committed.
func (c *Committer) OnCollision(f func(name string, collisions []Collision)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onCollision = f
}

// SubmitMerged commits the taken folders shards (see Store.Take) as one checkpoint with the
// reserved index (Reserve), in the background as Submit does: the files of every folder
// are merged into one, the first folder's (the lowest rank's, as the caller orders them)
// winning where two hold the same file. It waits for the commit in flight first. The
// folders that were merged are removed once the commit succeeds; when it fails, the first
// folder keeps what was merged so far and the error names it.
func (c *Committer) SubmitMerged(index int, shards []*Taken, meta Meta) error {
	if len(shards) == 0 {
		return errors.New("a checkpoint needs at least one folder")
	}
	c.submit.Lock()
	defer c.submit.Unlock()
	c.waitInFlight()
	done := make(chan struct{})
	c.mu.Lock()
	c.done = done
	c.mu.Unlock()
	go c.runMerged(shards, index, meta, done)
	return nil
}

// Discard removes a taken folder that will not be committed (a merged checkpoint that
// some rank never completed), with its files.
func (s *Store) Discard(t *Taken) error {
	defer t.release()
	if t.parent == nil {
		return nil
	}
	if err := t.parent.root.RemoveAll(t.name); err != nil {
		return fmt.Errorf("remove %s: %w", t.Dir, err)
	}
	return nil
}

// mergeShards moves (or copies, across filesystems) the files of c.extra into the staged
// folder, skipping those it already holds, and returns what it skipped. It runs after
// stage, before the files are synced and hashed: with the first folder moved, syncFiles
// lists and hashes everything; with it copied, the files merged here are added to c.files.
func (c *commit) mergeShards() ([]Collision, error) {
	var collisions []Collision
	for i, t := range c.extra {
		taken, _, err := t.parent.openIn(t.name)
		if err != nil {
			return nil, fmt.Errorf("the taken folder %s (handed over as %s) vanished before the commit: %w", t.Dir, t.Src, err)
		}
		skipped, err := c.mergeOne(taken)
		taken.Close()
		if err != nil {
			return nil, fmt.Errorf("merge %s: %w", t.Dir, err)
		}
		for _, p := range skipped {
			collisions = append(collisions, Collision{Path: p, Dropped: i + 1})
		}
	}
	return collisions, nil
}

// mergeOne merges one taken folder into the staged one and returns the files it skipped.
func (c *commit) mergeOne(taken *dir) ([]string, error) {
	t, err := listTree(taken)
	if bad := (*badEntryError)(nil); errors.As(err, &bad) {
		return nil, bad
	}
	if err != nil {
		return nil, err
	}
	for _, d := range t.dirs[1:] {
		rel := filepath.FromSlash(d.rel)
		info, err := c.staged.root.Lstat(rel)
		if err == nil && info.IsDir() {
			continue
		}
		if err == nil { // a file where this folder has a folder: its files cannot be merged
			return nil, fmt.Errorf("%s is a file in one folder and a folder in another", d.rel)
		}
		if err := c.staged.root.Mkdir(rel, 0o700); err != nil {
			return nil, err
		}
		if err := c.staged.root.Chmod(rel, d.mode&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky)|0o700); err != nil {
			return nil, err
		}
		if !c.moved {
			c.dirs = append(c.dirs, d)
		}
	}
	var skipped []string
	for _, e := range t.files {
		if e.rel == ManifestName || e.rel == manifestTemp {
			continue
		}
		if _, err := c.staged.root.Lstat(filepath.FromSlash(e.rel)); err == nil {
			skipped = append(skipped, e.rel)
			continue
		}
		moved, err := c.moveFile(taken, e.rel)
		if errors.Is(err, fs.ErrExist) {
			skipped = append(skipped, e.rel)
			continue
		}
		if err != nil {
			return nil, err
		}
		if !c.moved { // copied: syncFiles syncs c.files; when moved, it lists and hashes them all
			c.files = append(c.files, moved)
		}
	}
	return skipped, nil
}

// moveFile renames the file rel of taken into the same place in the staged folder, or
// copies it when they are on different filesystems or the first folder was copied (a
// failed commit then removes the staged copy, so nothing may have been moved into it).
// The copy returns its File, a rename the zero File. It never replaces a file
// (fs.ErrExist).
func (c *commit) moveFile(taken *dir, rel string) (File, error) {
	if !c.moved {
		return c.copyFile(taken, rel)
	}
	folder, name := path.Split(rel)
	from, to := taken, c.staged
	if folder != "" {
		var err error
		if from, _, err = taken.openIn(filepath.FromSlash(folder)); err != nil {
			return File{}, err
		}
		defer from.Close()
		if to, _, err = c.staged.openIn(filepath.FromSlash(folder)); err != nil {
			return File{}, err
		}
		defer to.Close()
	}
	err := rename(from, name, to, name)
	if err == nil {
		return File{}, nil
	}
	if !errors.Is(err, unix.EXDEV) {
		return File{}, err
	}
	return c.copyFile(taken, rel)
}
