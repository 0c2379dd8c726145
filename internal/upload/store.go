package upload

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/durable"
)

// Temporary files of uploads in progress are named tmpPrefix + random + tmpSuffix, which
// ValidName never allows.
const (
	tmpPrefix = ".put-"
	tmpSuffix = ".tmp"
)

// staleAfter is how old a temporary file must be for NewStore to take it for the
// leftover of a crash and remove it.
const staleAfter = time.Hour

// Store keeps uploaded package archives by name, as files in one folder. Its methods may
// be called from several goroutines at once.
type Store struct {
	dir string
}

// NewStore returns a Store that keeps its archives in the folder dir, creating it with
// mode 0700 if it does not exist. It removes the temporary files of uploads that a crash
// interrupted more than an hour ago.
func NewStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open package store: %w", err)
	}
	if err := removeStale(dir, time.Now()); err != nil {
		return nil, fmt.Errorf("open package store %s: %w", dir, err)
	}
	return &Store{dir: dir}, nil
}

// removeStale removes the temporary files in dir last written before now - staleAfter.
func removeStale(dir string, now time.Time) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tmpPrefix) || !strings.HasSuffix(e.Name(), tmpSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < staleAfter {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Put reads an archive from r and keeps it as name, replacing any archive of that name
// atomically. It stops reading and keeps nothing when r holds more than
// lim.MaxArchiveBytes (ErrTooLarge), or when the archive is not a zip file whose entries
// Extract would accept with lim (ErrBadArchive or ErrTooLarge); a bad name wraps
// ErrInvalidName. The file data is checked against its checksums only by Extract.
func (s *Store) Put(name string, r io.Reader, lim Limits) error {
	if err := ValidName(name); err != nil {
		return err
	}
	lim = lim.withDefaults()
	tmp, err := s.writeTemp(name, r, lim)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store package %s: %w", name, err)
	}
	if err := durable.Sync(s.dir); err != nil {
		return fmt.Errorf("store package %s: %w", name, err)
	}
	return nil
}

// writeTemp copies the upload to a synced temporary file in the store's folder, checks
// it, and returns its path; on error it removes the file.
func (s *Store) writeTemp(name string, r io.Reader, lim Limits) (path string, err error) {
	f, err := os.CreateTemp(s.dir, tmpPrefix+"*"+tmpSuffix)
	if err != nil {
		return "", fmt.Errorf("store package %s: %w", name, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("store package %s: %w", name, cerr)
		}
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	n, err := io.Copy(f, io.LimitReader(r, lim.MaxArchiveBytes+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("store package %s: read upload: %w", name, err)
	case n > lim.MaxArchiveBytes:
		return "", fmt.Errorf("store package %s: %w", name,
			refuse(ErrTooLarge, "the archive is over %d bytes, the most allowed", lim.MaxArchiveBytes))
	}
	if err := checkArchive(f, n, lim); err != nil {
		return "", fmt.Errorf("store package %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("store package %s: %w", name, err)
	}
	return f.Name(), nil
}

// checkArchive checks that the archive r of the given size is a zip file whose entries
// Extract would accept.
func checkArchive(r io.ReaderAt, size int64, lim Limits) error {
	zr, err := openZip(r, size, lim)
	if err != nil {
		return err
	}
	_, err = scan(zr, lim)
	return err
}

// Has reports whether the store holds an archive called name. An invalid name is an
// error that wraps ErrInvalidName.
func (s *Store) Has(name string) (bool, error) {
	if err := ValidName(name); err != nil {
		return false, err
	}
	info, err := os.Stat(filepath.Join(s.dir, name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look up package %s: %w", name, err)
	}
	return info.Mode().IsRegular(), nil
}

// Open opens the archive called name for reading; its Stat gives the size that Extract
// needs. A missing archive is an error that wraps fs.ErrNotExist, an invalid name one
// that wraps ErrInvalidName.
func (s *Store) Open(name string) (*os.File, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		return nil, fmt.Errorf("open package %s: %w", name, err)
	}
	return f, nil
}

// Info describes a stored package.
type Info struct {
	Name string
	Size int64
	// Used is when the package was last stored or marked used (Touch).
	Used time.Time
}

// List returns the packages the store holds, in no particular order.
func (s *Store) List() ([]Info, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list packages: %w", err)
	}
	var out []Info
	for _, e := range ents {
		if ValidName(e.Name()) != nil {
			continue // an upload in progress
		}
		info, err := s.Stat(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Stat describes the package called name; a missing one is an error that wraps
// fs.ErrNotExist.
func (s *Store) Stat(name string) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, err
	}
	fi, err := os.Lstat(filepath.Join(s.dir, name))
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file: %w", name, fs.ErrNotExist)
	}
	if err != nil {
		return Info{}, fmt.Errorf("look up package %s: %w", name, err)
	}
	return Info{Name: name, Size: fi.Size(), Used: fi.ModTime()}, nil
}

// Touch marks the package called name as used at t (its Info.Used).
func (s *Store) Touch(name string, t time.Time) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := os.Chtimes(filepath.Join(s.dir, name), t, t); err != nil {
		return fmt.Errorf("mark package %s used: %w", name, err)
	}
	return nil
}

// Remove removes the package called name; a missing one is not an error.
func (s *Store) Remove(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove package %s: %w", name, err)
	}
	return nil
}
