package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/trainyard/trainyard/internal/durable"
)

// Taken is a checkpoint folder that Take moved out of the training process's way. Its
// files are in Dir until a commit moves or copies them.
type Taken struct {
	Src string // the folder as it was handed over (absolute); now an empty folder
	Dir string // the private sibling that holds the files: <parent>/.<base>.trainyard-<random>
}

// Take checks the checkpoint folder src and moves it out of the way at once: it renames src
// to a private sibling in the same parent (constant time, whatever its size) and recreates
// an empty folder with the same permissions at src. The returned Taken is then committed
// with CommitTaken, which may run in the background.
//
// src must exist, be a folder (not a symbolic link), hold only regular files and folders,
// and lie outside the run's committed checkpoints and .staging.
func (s *Store) Take(src string) (*Taken, error) {
	if err := s.writable("take checkpoint"); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", src, err)
	}
	fi, err := checkSource(abs)
	if err != nil {
		return nil, err
	}
	if err := s.checkOutside(abs); err != nil {
		return nil, err
	}
	t := &Taken{Src: abs, Dir: filepath.Join(filepath.Dir(abs),
		"."+filepath.Base(abs)+".trainyard-"+randomSuffix())}
	if err := durable.RenameNoReplace(abs, t.Dir); err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return nil, fmt.Errorf("take checkpoint %s: %w (is it a mount point? pass a folder inside it)", abs, err)
		}
		return nil, fmt.Errorf("take checkpoint %s: %w", abs, err)
	}
	err = s.step("taken")
	if err == nil {
		err = recreate(abs, fi)
	}
	if err != nil {
		if rerr := durable.RenameNoReplace(t.Dir, abs); rerr != nil {
			return nil, fmt.Errorf("take checkpoint %s: %w (its files are in %s)", abs, err, t.Dir)
		}
		return nil, fmt.Errorf("take checkpoint %s: %w", abs, err)
	}
	return t, nil
}

// checkSource checks that src is a folder of regular files and folders.
func checkSource(src string) (fs.FileInfo, error) {
	fi, err := os.Lstat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("checkpoint %s does not exist", src)
	case err != nil:
		return nil, fmt.Errorf("checkpoint %s: %w", src, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("checkpoint %s is a symbolic link; pass the folder it points to", src)
	case fi.Mode().IsRegular():
		return nil, fmt.Errorf("checkpoint %s is a file; pass the folder that holds it (%s)",
			src, filepath.Dir(src))
	case !fi.IsDir():
		return nil, fmt.Errorf("checkpoint %s is %s, not a folder", src, describeType(fi.Mode()))
	}
	_, err = listTree(src)
	if bad := (*badEntryError)(nil); errors.As(err, &bad) {
		return nil, fmt.Errorf("checkpoint %s: %w", src, bad)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", src, err)
	}
	return fi, nil
}

// checkOutside refuses a folder that holds the run folder or lies in a committed
// checkpoint or in .staging.
func (s *Store) checkOutside(src string) error {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", src, err)
	}
	if real == s.real {
		return fmt.Errorf("checkpoint %s is the run folder; pass the folder the training process wrote", src)
	}
	if within(s.real, real) {
		return fmt.Errorf("checkpoint %s holds the run folder %s; pass the folder the training process wrote",
			src, s.dir)
	}
	if !within(real, s.real) {
		return nil
	}
	rel, err := filepath.Rel(s.real, real)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", src, err)
	}
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	if first == StagingDir || checkpointRE.MatchString(first) {
		return fmt.Errorf("checkpoint %s is inside %s, which trainyard manages; "+
			"pass a folder the training process wrote", src, filepath.Join(s.dir, first))
	}
	return nil
}

// within reports whether path is dir or inside it; both must be clean and absolute.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// recreate makes an empty folder at path with the mode and owner of fi.
func recreate(path string, fi fs.FileInfo) error {
	if err := os.Mkdir(path, 0o700); err != nil {
		return fmt.Errorf("recreate empty folder: %w", err)
	}
	mode := fi.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky)
	if err := os.Chmod(path, mode); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("recreate empty folder: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid()) {
		_ = os.Lchown(path, int(st.Uid), int(st.Gid)) // best effort: only root may give it away
	}
	return nil
}
