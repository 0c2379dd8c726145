// Package python embeds trainyard, the Python helper package that training scripts
// import (import trainyard), and installs it where workers can import it.
//
// The package lives in python/trainyard/ (standard library only; torch is imported
// lazily), with its unit tests in python/tests/. Its report() speaks the line-delimited
// JSON protocol documented in python/trainyard/_report.py over the Unix socket named by
// TRAINYARD_REPORT_SOCKET.
//
// The installed folder goes on every worker's PYTHONPATH, so whoever can write in it runs
// code in every worker: Install uses only a folder that the current user alone can write
// and whose files are exactly the embedded ones (see Install).
package python

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
)

// Files holds the trainyard package's sources, as trainyard/<name>.py, and the ray
// compatibility package's, as compat/ray/.../<name>.py.
//
//go:embed trainyard/*.py compat/ray/*.py compat/ray/train/*.py compat/ray/train/torch/*.py
var Files embed.FS

// packageDir is the folder in Files that holds the trainyard package.
const packageDir = "trainyard"

// compatDir is the folder in Files that holds the compatibility packages (ray): it goes
// on PYTHONPATH only where the job's Python lacks the real ones (see CompatDir).
const compatDir = "compat"

// CompatDir returns the folder, in a folder that Install returned, that holds the ray
// compatibility package (Ray Train without Ray). It belongs on a worker's PYTHONPATH only
// when the worker's Python cannot import ray by itself, so that a real Ray is never
// shadowed (PYTHONPATH comes before site-packages).
func CompatDir(installed string) string {
	return filepath.Join(installed, compatDir)
}

// Options tune Install. The zero value installs into the user's cache folder and logs
// nothing.
type Options struct {
	// Dir is the folder to install under instead of the user's cache folder
	// (os.UserCacheDir). It may be a shared temporary folder such as /tmp, where others
	// can write, as long as it has the sticky bit; the folders Install makes in it are
	// checked as in the cache.
	Dir string
	// Logger gets a warning when Install does not use the cache, or replaces what it
	// found there, and why. nil: no log.
	Logger *slog.Logger
}

// Install makes the trainyard package importable and returns the folder to put on
// PYTHONPATH, and a cleanup function that removes what only this process uses (call it
// once the workers are gone; it never fails).
//
// The package goes to <cache>/trainyard/python-<version>/trainyard/ and the ray
// compatibility package to <cache>/trainyard/python-<version>/compat/ray/, <cache> being
// the user's cache folder (os.UserCacheDir) or opts.Dir, and version the first 12 hex
// digits of the SHA-256 of the embedded files; the folders it makes are 0700, the files 0600.
// An existing copy is used only when every folder from the cache down is a real folder
// (not a symbolic link) of the current user that nobody else can write, and its files
// are exactly the embedded ones, in every folder (a __pycache__ folder that Python writes
// beside modules is allowed, with the same checks). A copy that fails this is replaced; a fresh copy is written
// under a temporary name and renamed into place, so concurrent Installs never see one
// half written. When the cache cannot be used (no home folder, or a cache folder another
// user could change), Install writes a fresh copy into a new private temporary folder
// for this process instead, removed by cleanup, and logs why.
func Install(opts Options) (dir string, cleanup func(), err error) {
	names, version, err := contents()
	if err != nil {
		return "", nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir, err = installCached(opts.Dir, names, version, logger)
	if err == nil {
		return dir, func() {}, nil
	}
	logger.Warn("the trainyard Python helper is installed into a private temporary folder for this run, not the cache",
		"reason", err.Error(),
		"fix", "the cache folder and the trainyard folder in it must be real folders of yours that only you can write (chmod go-w); or remove the trainyard folder")
	return installTemp(opts.Dir, names)
}

// InstallCached installs into the cache as Install does and returns the folder to put
// on PYTHONPATH, for use outside a run (trainyard python-path): it fails, saying why,
// where Install would fall back to a temporary folder that its caller removes.
func InstallCached(opts Options) (string, error) {
	names, version, err := contents()
	if err != nil {
		return "", err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir, err := installCached(opts.Dir, names, version, logger)
	if err != nil {
		return "", fmt.Errorf("install the trainyard Python helper into the cache: %w (the cache folder and the trainyard "+
			"folder in it must be real folders of yours that only you can write)", err)
	}
	return dir, nil
}

// installCached installs into <base>/trainyard/python-<version>, base being dir or the
// user's cache folder, and returns that folder.
func installCached(dir string, names []string, version string, logger *slog.Logger) (string, error) {
	base, err := cacheBase(dir)
	if err != nil {
		return "", err
	}
	top := filepath.Join(base, "trainyard")
	if err := os.Mkdir(top, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create %s: %w", top, err)
	}
	if err := checkPrivateDir(top); err != nil {
		return "", err
	}
	root := filepath.Join(top, "python-"+version)
	err = verify(root, names)
	if err == nil {
		return root, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		logger.Warn("replacing the cached trainyard Python helper", "folder", root, "reason", err.Error())
	}
	if err := replace(top, root, names); err != nil {
		return "", err
	}
	if err := verify(root, names); err != nil {
		return "", fmt.Errorf("the fresh copy in %s: %w", root, err)
	}
	return root, nil
}

// cacheBase returns the folder that holds Trainyard's cache: dir when given (a folder
// that others may write only when it has the sticky bit), or the user's cache folder
// (created 0700 when missing, links resolved), which must be the current user's and
// nobody else's to write.
func cacheBase(dir string) (string, error) {
	if dir != "" {
		info, err := os.Stat(dir)
		if err != nil {
			return "", err
		}
		if !info.IsDir() {
			return "", fmt.Errorf("%s is not a folder", dir)
		}
		if info.Mode()&0o022 != 0 && info.Mode()&fs.ModeSticky == 0 {
			return "", fmt.Errorf("others can write in %s and it has no sticky bit", dir)
		}
		return dir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache folder: %w", err)
	}
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return "", fmt.Errorf("create the cache folder: %w", err)
	}
	if cache, err = filepath.EvalSymlinks(cache); err != nil {
		return "", fmt.Errorf("the cache folder: %w", err)
	}
	return cache, checkPrivateDir(cache)
}

// replace writes a fresh copy of the package into a temporary folder in top and puts it
// at root: renamed into place when root is missing, or atomically exchanged with what is
// there (then removed) unless a concurrent Install has just put a good copy there.
func replace(top, root string, names []string) error {
	tmp, err := os.MkdirTemp(top, ".python-tmp-")
	if err != nil {
		return fmt.Errorf("install the trainyard Python package: %w", err)
	}
	defer os.RemoveAll(tmp) // after a rename: a no-op; after an exchange: the old copy
	if err := write(tmp, names); err != nil {
		return fmt.Errorf("install the trainyard Python package into %s: %w", top, err)
	}
	if err := os.Rename(tmp, root); err == nil {
		return nil
	}
	if verify(root, names) == nil {
		return nil
	}
	if err := exchange(tmp, root); err != nil {
		return fmt.Errorf("replace %s: %w", root, err)
	}
	return nil
}

// installTemp writes the package into a new private folder in dir (or the system's
// temporary folder), for this process only.
func installTemp(dir string, names []string) (string, func(), error) {
	if dir == "" {
		dir = os.TempDir()
	}
	root, err := os.MkdirTemp(dir, "trainyard-python-") // 0700, an unpredictable name
	if err != nil {
		return "", nil, fmt.Errorf("install the trainyard Python package: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(root) }
	if err := write(root, names); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("install the trainyard Python package into %s: %w", root, err)
	}
	return root, cleanup, nil
}

// Version returns the version of the embedded package: the first 12 hex digits of a
// SHA-256 over every file's name and contents (the python-<version> folder Install uses).
func Version() (string, error) {
	_, version, err := contents()
	return version, err
}

// contents returns the embedded files' paths (slash-separated, relative to Files, in
// lexical order) and the version: the first 12 hex digits of a SHA-256 over every file's
// path and contents.
func contents() (names []string, version string, err error) {
	h := sha256.New()
	err = fs.WalkDir(Files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := Files.ReadFile(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(data))
		h.Write(data)
		names = append(names, name)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if len(names) == 0 {
		return nil, "", errors.New("the trainyard Python package is not embedded")
	}
	return names, hex.EncodeToString(h.Sum(nil))[:12], nil
}

// write writes the embedded files names into root, a new folder of this process: each
// file 0600, and the folders that hold them 0700.
func write(root string, names []string) error {
	made := map[string]bool{".": true}
	for _, name := range names {
		if err := mkdirs(root, path.Dir(name), made); err != nil {
			return err
		}
		data, err := Files.ReadFile(name)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(root, filepath.FromSlash(name)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// mkdirs makes the folder dir (slash-separated, relative to root) and its parents, 0700,
// unless made says they exist.
func mkdirs(root, dir string, made map[string]bool) error {
	if made[dir] {
		return nil
	}
	if err := mkdirs(root, path.Dir(dir), made); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(root, filepath.FromSlash(dir)), 0o700); err != nil {
		return err
	}
	made[dir] = true
	return nil
}
