package checkpoint

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// copy copies the taken folder to the new folder staged in .staging, file by file,
// computing each file's size and CRC-32C from the data it reads (one pass over the
// source). Folders keep their modes (plus u+rwx, so that the checkpoint can be deleted
// later), files their permissions.
func (c *commit) copy(taken *dir, staged string) error {
	t, err := listTree(taken)
	if bad := (*badEntryError)(nil); errors.As(err, &bad) {
		return fmt.Errorf("copy %s: %w", c.t.Dir, bad)
	}
	if err != nil {
		return fmt.Errorf("copy %s (the checkpoint vanished or changed during the copy?): %w", c.t.Dir, err)
	}
	if err := c.staging.root.Mkdir(staged, 0o700); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if err := c.openStaged(staged); err != nil {
		return err
	}
	c.dirs = t.dirs
	for _, d := range t.dirs[1:] {
		if err := c.staged.root.Mkdir(filepath.FromSlash(d.rel), 0o700); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
	}
	for _, e := range t.files {
		if e.rel == ManifestName || e.rel == manifestTemp {
			continue // a stale one; writeManifest writes the new one
		}
		f, err := c.copyFile(taken, e.rel)
		if err != nil {
			return fmt.Errorf("copy %s: %w", c.t.Dir, err)
		}
		c.files = append(c.files, f)
	}
	for i := len(t.dirs) - 1; i >= 0; i-- {
		d := t.dirs[i]
		mode := d.mode&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky) | 0o700
		if err := c.staged.root.Chmod(filepath.FromSlash(d.rel), mode); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
	}
	return nil
}

// copyFile copies one file of the taken folder to the staged one, failing if the file
// vanishes or changes size meanwhile.
func (c *commit) copyFile(taken *dir, rel string) (File, error) {
	in, err := openRegular(taken, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, fmt.Errorf("%s vanished during the copy", rel)
	}
	if err != nil {
		return File{}, err
	}
	defer in.Close()
	before, err := in.Stat()
	if err != nil {
		return File{}, err
	}
	if err := c.s.step("copy " + rel); err != nil {
		return File{}, err
	}
	out, err := c.staged.root.OpenFile(filepath.FromSlash(rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return File{}, err
	}
	n, crc, err := copyData(out, in, c.buf)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", rel, err)
	}
	after, err := in.Stat()
	if err != nil {
		return File{}, err
	}
	if n != before.Size() || after.Size() != before.Size() {
		return File{}, fmt.Errorf("%s changed size during the copy (%d bytes when it began, %d read, %d after); "+
			"hand a checkpoint over only once it is completely written", rel, before.Size(), n, after.Size())
	}
	if _, err := taken.root.Lstat(filepath.FromSlash(rel)); err != nil {
		return File{}, fmt.Errorf("%s vanished during the copy", rel)
	}
	if err := c.staged.root.Chmod(filepath.FromSlash(rel), before.Mode().Perm()); err != nil {
		return File{}, err
	}
	return File{Path: rel, Size: n, CRC32C: crcHex(crc)}, nil
}

// copyData copies in to the new file out through buf, closes out, and returns the bytes
// copied and their CRC-32C. It starts the writeback of every chunk it wrote, so that the
// disk writes while the copy goes on and the later fsync has little left to wait for.
func copyData(out *os.File, in io.Reader, buf []byte) (int64, uint32, error) {
	var n, flushed int64
	var crc uint32
	for {
		k, rerr := in.Read(buf)
		if k > 0 {
			crc = crc32.Update(crc, castagnoli, buf[:k])
			if _, err := out.Write(buf[:k]); err != nil {
				out.Close()
				return n, crc, err
			}
			n += int64(k)
		}
		if n-flushed >= writebackChunk || (rerr != nil && n > flushed) {
			startWriteback(out, flushed, n-flushed)
			flushed = n
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			out.Close()
			return n, crc, rerr
		}
	}
	return n, crc, out.Close()
}
