package checkpoint

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// bufSize is the size of the buffers that files are read and copied with. Larger ones
// (1 MiB) made copies stall now and then on the 2-core reference VM; 256 KiB did not.
const bufSize = 256 << 10

// writebackChunk is how many bytes a copy writes before it starts their writeback.
const writebackChunk = 8 << 20

// castagnoli is the CRC-32C table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is a regular file or a folder found in a folder tree.
type entry struct {
	rel  string // slash-separated, relative to the tree's root
	size int64
	mode fs.FileMode
	uid  int
}

// tree is what a folder holds: its folders (the root first, as ".") and regular files,
// in lexical order.
type tree struct {
	dirs  []entry
	files []entry
}

// badEntryError reports something in a tree that is neither a regular file nor a folder.
type badEntryError struct {
	rel  string
	kind string
}

func (e *badEntryError) Error() string {
	return fmt.Sprintf("%s is %s; a checkpoint may hold only regular files and folders", e.rel, e.kind)
}

// listTree walks the open folder d without following links.
func listTree(d *dir) (tree, error) {
	var t tree
	err := fs.WalkDir(d.root.FS(), ".", func(rel string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && !e.Type().IsRegular() {
			return &badEntryError{rel: rel, kind: describeType(e.Type())}
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		en := entry{rel: rel, size: info.Size(), mode: info.Mode(), uid: uidOf(info)}
		if e.IsDir() {
			t.dirs = append(t.dirs, en)
		} else {
			t.files = append(t.files, en)
		}
		return nil
	})
	return t, err
}

// foreign returns the first entry of t that belongs to another user, if any.
func (t tree) foreign() (entry, bool) {
	for _, e := range append(slices.Clone(t.dirs), t.files...) {
		if e.uid >= 0 && e.uid != os.Geteuid() {
			return e, true
		}
	}
	return entry{}, false
}

// describeType names a file type for error messages.
func describeType(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// hashFile reads the regular file rel (slash-separated) of d once and returns its size
// and CRC-32C; with sync it also syncs the file to disk.
func hashFile(d *dir, rel string, buf []byte, sync bool) (int64, uint32, error) {
	f, err := openRegular(d, rel)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var n int64
	var crc uint32
	for {
		k, err := f.Read(buf)
		crc = crc32.Update(crc, castagnoli, buf[:k])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if sync {
		if err := f.Sync(); err != nil {
			return 0, 0, err
		}
	}
	return n, crc, nil
}

// openRegular opens the file rel (slash-separated) of d for reading, refusing anything but
// a regular file.
func openRegular(d *dir, rel string) (*os.File, error) {
	f, err := d.root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = &badEntryError{rel: rel, kind: describeType(info.Mode())}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// FileCRC returns the CRC-32C of the regular file at path as the manifest writes it (8 hex
// digits), and its size.
func FileCRC(path string) (string, int64, error) {
	d, err := openDirPath(filepath.Dir(path))
	if err != nil {
		return "", 0, err
	}
	defer d.Close()
	n, crc, err := hashFile(d, filepath.Base(path), make([]byte, bufSize), false)
	return crcHex(crc), n, err
}

// crcHex formats a CRC-32C as the manifest writes it.
func crcHex(crc uint32) string {
	return fmt.Sprintf("%08x", crc)
}

// randomSuffix returns 12 random hex digits for private names.
func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startWriteback asks the kernel to start writing the given range of f to disk, without
// waiting for it. It is only a hint: a later fsync makes the data durable.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
