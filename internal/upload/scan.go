package upload

import (
	"archive/zip"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// maxElemLen is the longest path element an entry name may hold (NAME_MAX on Linux).
const maxElemLen = 255

// maxNameBytes is the longest entry name (PATH_MAX on Linux).
const maxNameBytes = 4096

// rootEntry is the one entry name with a "." path element that is allowed: the folder
// entry Ray's working_dir packager writes for the package's folder itself when that
// folder is empty (Python's ZipFile.write(folder, ".") names it "./"). It stands for the
// destination, which exists already, so nothing is written for it.
const rootEntry = "./"

// entry is an archive entry that passed the checks of scan.
type entry struct {
	f    *zip.File
	name string // slash-separated, clean, relative, without a trailing slash; "." for rootEntry
	dir  bool
	exec bool // the owner may execute the file
}

// openZip reads the central directory of the zip archive r of the given size.
func openZip(r io.ReaderAt, size int64, lim Limits) (*zip.Reader, error) {
	if size > lim.MaxArchiveBytes {
		return nil, refuse(ErrTooLarge, "the archive has %d bytes; at most %d are allowed", size, lim.MaxArchiveBytes)
	}
	zr, err := zip.NewReader(r, size)
	if errors.Is(err, zip.ErrInsecurePath) {
		err = nil // GODEBUG=zipinsecurepath=0: scan says which entry, and why
	}
	if err != nil {
		return nil, refuse(ErrBadArchive, "not a zip archive: %v", err)
	}
	return zr, nil
}

// scan checks every entry of zr against the rules in the package comment and lim, without
// reading any file data, and returns the entries in archive order.
func scan(zr *zip.Reader, lim Limits) ([]entry, error) {
	if len(zr.File) > lim.MaxFiles {
		return nil, refuse(ErrTooLarge, "the archive has %d entries; at most %d are allowed", len(zr.File), lim.MaxFiles)
	}
	entries := make([]entry, 0, len(zr.File))
	t := layout{nodes: make(map[string]nodeKind, len(zr.File)), max: lim.MaxFiles}
	var claimed uint64
	for _, f := range zr.File {
		e, err := checkEntry(f)
		if err != nil {
			return nil, err
		}
		if err := t.add(e); err != nil {
			return nil, err
		}
		if !e.dir {
			if f.UncompressedSize64 > uint64(lim.MaxTotalBytes)-claimed {
				return nil, refuse(ErrTooLarge, "the archive's files claim more than %d bytes unpacked, the most allowed", lim.MaxTotalBytes)
			}
			claimed += f.UncompressedSize64
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// nodeKind is what a path in the unpacked tree is.
type nodeKind int

const (
	impliedDir  nodeKind = iota // a folder that only other entries' names need
	explicitDir                 // a folder entry
	file                        // a file entry
)

// layout is the tree that the entries scanned so far unpack to. Every path in it has its
// parent folders in it too.
type layout struct {
	nodes map[string]nodeKind // by slash-separated path
	max   int                 // the most nodes allowed
}

// add adds an entry and the folders above it, refusing duplicates, an entry that needs a
// folder where there is a file, and more nodes than allowed.
func (t *layout) add(e entry) error {
	if err := t.addNode(e); err != nil {
		return err
	}
	for p := e.name; ; {
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
		if kind, ok := t.nodes[p]; ok {
			if kind == file {
				return refuse(ErrBadArchive, "entry %q needs %q to be a folder, but the archive has a file by that name", e.f.Name, p)
			}
			break // p's parents are in the tree already
		}
		t.nodes[p] = impliedDir
		if len(t.nodes) > t.max {
			return t.tooMany()
		}
	}
	return nil
}

// addNode adds the entry itself.
func (t *layout) addNode(e entry) error {
	kind, ok := t.nodes[e.name]
	switch {
	case ok && kind == impliedDir && e.dir:
		t.nodes[e.name] = explicitDir
		return nil
	case ok && kind == impliedDir:
		return refuse(ErrBadArchive, "entry %q is a file, but other entries need a folder by that name", e.f.Name)
	case ok:
		return refuse(ErrBadArchive, "entry %q: the archive has another entry by that name", e.f.Name)
	}
	t.nodes[e.name] = file
	if e.dir {
		t.nodes[e.name] = explicitDir
	}
	if len(t.nodes) > t.max {
		return t.tooMany()
	}
	return nil
}

// tooMany is the error for a tree of more than t.max files and folders.
func (t *layout) tooMany() error {
	return refuse(ErrTooLarge, "the archive unpacks to more than %d files and folders, the most allowed", t.max)
}

// checkEntry checks one entry's name, type, flags and compression method.
func checkEntry(f *zip.File) (entry, error) {
	typ := f.Mode().Type()
	if typ != 0 && typ != fs.ModeDir {
		return entry{}, refuse(ErrBadArchive, "entry %q is %s; only regular files and folders are allowed", f.Name, describeType(typ))
	}
	e := entry{f: f, dir: typ == fs.ModeDir, exec: f.Mode()&0o100 != 0}
	if e.dir && f.Name == rootEntry {
		e.name = "."
		return e, nil
	}
	name, err := checkName(f.Name, e.dir)
	if err != nil {
		return entry{}, err
	}
	e.name = name
	switch {
	case f.Flags&0x1 != 0:
		return entry{}, refuse(ErrBadArchive, "entry %q is encrypted, which is not supported", f.Name)
	case !e.dir && f.Method != zip.Store && f.Method != zip.Deflate:
		return entry{}, refuse(ErrBadArchive, "entry %q uses compression method %d; only store (0) and deflate (8) are supported",
			f.Name, f.Method)
	}
	return e, nil
}

// checkName checks an entry's name and returns it without the trailing slash of a folder.
func checkName(raw string, dir bool) (string, error) {
	bad := func(why string) error {
		return refuse(ErrBadArchive, "entry %q %s", raw, why)
	}
	name := raw
	if dir {
		name = strings.TrimSuffix(raw, "/")
	}
	switch {
	case raw == "":
		return "", refuse(ErrBadArchive, "an entry has an empty name")
	case !utf8.ValidString(raw):
		return "", bad("has a name that is not valid UTF-8")
	case strings.IndexByte(raw, 0) >= 0:
		return "", bad("has a NUL byte in its name")
	case strings.IndexByte(raw, '\\') >= 0:
		return "", bad("has a backslash in its name; zip names use '/'")
	case strings.HasPrefix(raw, "/"):
		return "", bad("has an absolute path; names must be relative to the package's folder")
	case len(raw) > maxNameBytes:
		return "", bad("has a name longer than 4096 bytes")
	}
	for _, elem := range strings.Split(name, "/") {
		switch {
		case elem == "..":
			return "", bad(`has a ".." path element, which could write outside the destination (zip slip)`)
		case elem == "" || elem == ".":
			return "", bad(`has an empty or "." path element`)
		case len(elem) > maxElemLen:
			return "", bad("has a path element longer than 255 bytes")
		}
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", bad("is not a path inside the destination")
	}
	return name, nil
}

// describeType names a file type, for messages.
func describeType(t fs.FileMode) string {
	switch {
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeDevice != 0:
		return "a device"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}
