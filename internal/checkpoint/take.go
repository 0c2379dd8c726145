package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Taken is a checkpoint folder that Take moved out of the training process's way. Its
// files are in Dir until a commit moves or copies them.
type Taken struct {
	Src string // the folder as it was handed over (absolute); now an empty folder
	Dir string // the private sibling that holds the files: <parent>/.<base>.trainyard-<random>

	parent *dir   // the folder that holds Src and Dir, opened by Take; CommitTaken closes it
	name   string // Dir's base name
}

// Take checks the checkpoint folder src and moves it out of the way at once: it renames src
// to a private sibling in the same parent (constant time, whatever its size) and recreates
// an empty folder with the same permissions at src. The returned Taken is then committed
// with CommitTaken, which may run in the background.
//
// src must exist, be a folder (not a symbolic link) of the current user, hold only regular
// files and folders of the current user, and lie outside the run's committed checkpoints
// and .staging. A src inside the run folder's path is looked up in the run folder the
// store opened; the folder that holds src is opened once, and everything after that
// (the checks, the renames, the commit) goes through it.
func (s *Store) Take(src string) (*Taken, error) {
	if err := s.writable("take checkpoint"); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", src, err)
	}
	parent, err := s.openParent(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %s does not exist", abs)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", abs, err)
	}
	t, err := s.take(parent, abs)
	if err != nil {
		parent.Close()
		return nil, err
	}
	return t, nil
}

// take is Take of abs, in its opened parent folder.
func (s *Store) take(parent *dir, abs string) (*Taken, error) {
	base := filepath.Base(abs)
	fi, err := checkSource(parent, base, abs)
	if err != nil {
		return nil, err
	}
	if err := s.checkOutside(parent, base, abs, fi); err != nil {
		return nil, err
	}
	hidden := "." + base + ".trainyard-" + randomSuffix()
	t := &Taken{Src: abs, Dir: filepath.Join(filepath.Dir(abs), hidden), parent: parent, name: hidden}
	if err := rename(parent, base, parent, hidden); err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return nil, fmt.Errorf("take checkpoint %s: %w (is it a mount point? pass a folder inside it)", abs, err)
		}
		return nil, fmt.Errorf("take checkpoint %s: %w", abs, err)
	}
	err = s.step("taken")
	if err == nil {
		err = recreate(parent, base, fi)
	}
	if err != nil {
		if rerr := rename(parent, hidden, parent, base); rerr != nil {
			return nil, fmt.Errorf("take checkpoint %s: %w (its files are in %s)", abs, err, t.Dir)
		}
		return nil, fmt.Errorf("take checkpoint %s: %w", abs, err)
	}
	return t, nil
}

// openParent opens the folder that holds abs: in the run folder the store opened when abs
// lies in the run folder's path, else by its path.
func (s *Store) openParent(abs string) (*dir, error) {
	rel, err := filepath.Rel(s.dir, filepath.Dir(abs))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || abs == s.dir {
		return openDirPath(filepath.Dir(abs))
	}
	if rel == "." {
		root, err := s.run.root.OpenRoot(".")
		if err != nil {
			return nil, err
		}
		return newDir(root, s.dir)
	}
	d, _, err := s.run.openIn(rel)
	return d, err
}

// checkSource checks that base, in parent, is a folder of regular files and folders of
// the current user.
func checkSource(parent *dir, base, abs string) (fs.FileInfo, error) {
	d, fi, err := parent.openIn(base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("checkpoint %s does not exist", abs)
	case fi != nil && fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("checkpoint %s is a symbolic link; pass the folder it points to", abs)
	case fi != nil && fi.Mode().IsRegular():
		return nil, fmt.Errorf("checkpoint %s is a file; pass the folder that holds it (%s)",
			abs, filepath.Dir(abs))
	case fi != nil && !fi.IsDir():
		return nil, fmt.Errorf("checkpoint %s is %s, not a folder", abs, describeType(fi.Mode()))
	case err != nil:
		return nil, fmt.Errorf("checkpoint %s: %w", abs, err)
	}
	defer d.Close()
	if err := checkOwner("it", fi); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", abs, err)
	}
	t, err := listTree(d)
	if bad := (*badEntryError)(nil); errors.As(err, &bad) {
		return nil, fmt.Errorf("checkpoint %s: %w", abs, bad)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", abs, err)
	}
	if e, ok := t.foreign(); ok {
		return nil, fmt.Errorf("checkpoint %s: %w", abs, ownerError(e.rel, e.uid))
	}
	return fi, nil
}

// checkOutside refuses a folder that is the run folder, holds it, or lies in a committed
// checkpoint or in .staging. It compares where the opened folders are now, with no
// symbolic links.
func (s *Store) checkOutside(parent *dir, base, abs string, fi fs.FileInfo) error {
	if run, err := s.run.f.Stat(); err == nil && os.SameFile(run, fi) {
		return fmt.Errorf("checkpoint %s is the run folder; pass the folder the training process wrote", abs)
	}
	runReal, err := s.run.real()
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", abs, err)
	}
	parentReal, err := parent.real()
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", abs, err)
	}
	real := filepath.Join(parentReal, base)
	if within(runReal, real) {
		return fmt.Errorf("checkpoint %s holds the run folder %s; pass the folder the training process wrote",
			abs, s.dir)
	}
	if !within(real, runReal) {
		return nil
	}
	rel, err := filepath.Rel(runReal, real)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", abs, err)
	}
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	if first == StagingDir || checkpointRE.MatchString(first) {
		return fmt.Errorf("checkpoint %s is inside %s, which trainyard manages; "+
			"pass a folder the training process wrote", abs, filepath.Join(s.dir, first))
	}
	return nil
}

// within reports whether path is dir or inside it; both must be clean and absolute.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// recreate makes an empty folder base in parent with the mode and owner of fi.
func recreate(parent *dir, base string, fi fs.FileInfo) error {
	if err := parent.root.Mkdir(base, 0o700); err != nil {
		return fmt.Errorf("recreate empty folder: %w", err)
	}
	mode := fi.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky)
	if err := parent.root.Chmod(base, mode); err != nil {
		_ = parent.root.Remove(base)
		return fmt.Errorf("recreate empty folder: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid()) {
		_ = parent.root.Lchown(base, int(st.Uid), int(st.Gid)) // best effort: only root may give it away
	}
	return nil
}

// release closes the folder that holds the taken folder.
func (t *Taken) release() {
	if t.parent != nil {
		t.parent.Close()
		t.parent = nil
	}
}
