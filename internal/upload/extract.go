package upload

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/trainyard/trainyard/internal/durable"
)

// Extract unpacks the zip archive of the given size into the new folder dest, which must
// not exist yet (its parent must), keeping the archive's layout. It refuses what the
// package comment lists; on any error nothing is left at dest or beside it. Refusals wrap
// ErrBadArchive or ErrTooLarge.
func Extract(archive io.ReaderAt, size int64, dest string, lim Limits) error {
	lim = lim.withDefaults()
	dest = filepath.Clean(dest)
	if err := checkDest(dest); err != nil {
		return err
	}
	zr, err := openZip(archive, size, lim)
	if err != nil {
		return fmt.Errorf("extract package to %s: %w", dest, err)
	}
	entries, err := scan(zr, lim)
	if err != nil {
		return fmt.Errorf("extract package to %s: %w", dest, err)
	}
	if err := extractAtomically(entries, dest, lim); err != nil {
		return fmt.Errorf("extract package to %s: %w", dest, err)
	}
	return nil
}

// UnpackedSize returns how many bytes the files of the zip archive of the given size
// claim to hold unpacked, which Extract writes at most, after the checks Extract makes
// before it writes anything; refusals wrap ErrBadArchive or ErrTooLarge.
func UnpackedSize(archive io.ReaderAt, size int64, lim Limits) (int64, error) {
	lim = lim.withDefaults()
	zr, err := openZip(archive, size, lim)
	if err != nil {
		return 0, err
	}
	entries, err := scan(zr, lim)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range entries {
		if !e.dir {
			total += int64(e.f.UncompressedSize64) // scan keeps the sum under MaxTotalBytes
		}
	}
	return total, nil
}

// checkDest refuses a destination that exists already.
func checkDest(dest string) error {
	_, err := os.Lstat(dest)
	switch {
	case err == nil:
		return fmt.Errorf("extract package to %s: %w", dest, fs.ErrExist)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("extract package: %w", err)
	}
	return nil
}

// extractAtomically writes entries into a temporary sibling of dest and renames it to
// dest when all are written; on error it removes the sibling.
func extractAtomically(entries []entry, dest string, lim Limits) (err error) {
	tmp, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".extract-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := writeEntries(tmp, entries, lim); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return durable.RenameNoReplace(tmp, dest)
}

// writeEntries creates the entries' folders and files in the folder dir, through an
// os.Root so that nothing can be written outside it.
func writeEntries(dir string, entries []entry, lim Limits) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	budget := lim.MaxTotalBytes
	for _, e := range entries {
		if e.dir && e.name == "." { // rootEntry: dir itself
			continue
		}
		if e.dir {
			if err := root.MkdirAll(e.name, 0o755); err != nil {
				return err
			}
			continue
		}
		if parent := path.Dir(e.name); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return err
			}
		}
		n, err := writeFile(root, e, budget)
		if errors.Is(err, errOverBudget) {
			return refuse(ErrTooLarge, "the archive's files hold more than %d bytes unpacked, the most allowed (entry %q went past it)",
				lim.MaxTotalBytes, e.f.Name)
		}
		if err != nil {
			return err
		}
		budget -= n
	}
	return nil
}

// errOverBudget is what writeFile returns when an entry's data is longer than its budget.
var errOverBudget = errors.New("over budget")

// writeFile copies the data of the file entry e into a new file in root, and returns how
// many bytes it wrote. It fails with errOverBudget when the data is longer than budget,
// whatever the entry's header claims.
func writeFile(root *os.Root, e entry, budget int64) (int64, error) {
	rc, err := e.f.Open()
	if err != nil {
		return 0, refuse(ErrBadArchive, "entry %q cannot be read: %v", e.f.Name, err)
	}
	defer rc.Close()
	perm := fs.FileMode(0o644)
	if e.exec {
		perm = 0o755
	}
	w, err := root.OpenFile(e.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	src := &readErrors{r: io.LimitReader(rc, budget+1)}
	n, err := io.Copy(w, src)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	switch {
	case src.err != nil:
		return n, dataError(e, src.err)
	case err != nil:
		return n, fmt.Errorf("write %s: %w", e.name, err)
	case n > budget:
		return n, errOverBudget
	}
	return n, nil
}

// dataError describes an error reading an entry's data.
func dataError(e entry, err error) error {
	switch {
	case errors.Is(err, zip.ErrFormat):
		return refuse(ErrBadArchive, "entry %q holds more data than its header says, or is damaged", e.f.Name)
	case errors.Is(err, zip.ErrChecksum):
		return refuse(ErrBadArchive, "entry %q is damaged: its checksum does not match", e.f.Name)
	}
	return refuse(ErrBadArchive, "entry %q cannot be read: %v", e.f.Name, err)
}

// readErrors is a reader that remembers the first error, other than io.EOF, of the reader
// it wraps, so that read errors can be told from write errors after an io.Copy.
type readErrors struct {
	r   io.Reader
	err error
}

func (r *readErrors) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}
