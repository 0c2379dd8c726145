// Package python embeds trainyard, the Python helper package that training scripts
// import (import trainyard), and installs it where workers can import it.
//
// The package lives in python/trainyard/ (standard library only; torch is imported
// lazily), with its unit tests in python/tests/. Its report() speaks the line-delimited
// JSON protocol documented in python/trainyard/_report.py over the Unix socket named by
// TRAINYARD_REPORT_SOCKET.
package python

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// Files holds the trainyard package's sources, as trainyard/<name>.py.
//
//go:embed trainyard/*.py
var Files embed.FS

// packageDir is the folder in Files that holds the package.
const packageDir = "trainyard"

// Install writes the trainyard package into
// <dir>/trainyard-python-<version>/trainyard/, where version is the first 12 hex digits
// of the SHA-256 of the package's files, and returns <dir>/trainyard-python-<version>:
// the folder to put on PYTHONPATH. The folder is written under a temporary name and
// renamed into place, so no process ever sees it half written; when it already exists
// (from an earlier run, or a concurrent Install), it is reused as it is.
func Install(dir string) (string, error) {
	names, version, err := contents()
	if err != nil {
		return "", err
	}
	root := filepath.Join(dir, "trainyard-python-"+version)
	if info, err := os.Stat(filepath.Join(root, packageDir)); err == nil && info.IsDir() {
		return root, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("installing the trainyard Python package: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".trainyard-python-tmp-")
	if err != nil {
		return "", fmt.Errorf("installing the trainyard Python package: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := write(tmp, names); err != nil {
		return "", fmt.Errorf("installing the trainyard Python package into %s: %w", dir, err)
	}
	if err := os.Rename(tmp, root); err != nil {
		// Another Install may have put the same version there first.
		if info, statErr := os.Stat(filepath.Join(root, packageDir)); statErr == nil && info.IsDir() {
			return root, nil
		}
		return "", fmt.Errorf("installing the trainyard Python package: %w", err)
	}
	return root, nil
}

// contents returns the package's file names (sorted) and its version: the first 12 hex
// digits of a SHA-256 over every file's name and contents.
func contents() (names []string, version string, err error) {
	entries, err := fs.ReadDir(Files, packageDir)
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	for _, e := range entries { // fs.ReadDir sorts by name
		data, err := Files.ReadFile(path.Join(packageDir, e.Name()))
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(data))
		h.Write(data)
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		return nil, "", errors.New("the trainyard Python package is not embedded")
	}
	return names, hex.EncodeToString(h.Sum(nil))[:12], nil
}

// write writes the package into root/trainyard/, readable by everyone.
func write(root string, names []string) error {
	if err := os.Chmod(root, 0o755); err != nil { // MkdirTemp makes it 0700
		return err
	}
	pkg := filepath.Join(root, packageDir)
	if err := os.Mkdir(pkg, 0o755); err != nil {
		return err
	}
	for _, name := range names {
		data, err := Files.ReadFile(path.Join(packageDir, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(pkg, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
