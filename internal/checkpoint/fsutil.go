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

	"golang.org/x/sys/unix"
)

// bufSize is the size of the buffers that files are read and copied with. Larger ones
// (1 MiB) made copies stall now and then on the 2-core reference VM; 256 KiB did not.
const bufSize = 256 << 10

// writebackChunk is how many bytes a copy writes before it starts their writeback.
const writebackChunk = 8 << 20

// castagnoli is the CRC-32C table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entry is a regular file found in a folder tree.
type entry struct {
	rel  string // slash-separated, relative to the tree's root
	size int64
	mode fs.FileMode
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

// listTree walks the folder root, which must not be a symbolic link.
func listTree(root string) (tree, error) {
	var t tree
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.IsDir() && !d.Type().IsRegular() {
			return &badEntryError{rel: rel, kind: describeType(d.Type())}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{rel: rel, size: info.Size(), mode: info.Mode()}
		if d.IsDir() {
			t.dirs = append(t.dirs, e)
		} else {
			t.files = append(t.files, e)
		}
		return nil
	})
	return t, err
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

// hashFile reads the file at path once and returns its size and CRC-32C; with sync it also
// syncs the file to disk.
func hashFile(path string, buf []byte, sync bool) (int64, uint32, error) {
	f, err := os.Open(path)
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

// device returns the ID of the filesystem that holds path.
func device(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return st.Dev, nil
}

// startWriteback asks the kernel to start writing the given range of f to disk, without
// waiting for it. It is only a hint: a later fsync makes the data durable.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
