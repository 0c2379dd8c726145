package podworker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CopySelf copies the running executable to dir/trainyard with mode 0755 and returns that
// path. It is the init container's command (`trainyard copy-self /trainyard/bin`): the
// operator's image has no shell and no cp. The copy is written beside its final name and
// renamed into place, so the worker container never sees half a binary.
func CopySelf(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the trainyard executable: %w", err)
	}
	return copyExecutable(self, filepath.Join(dir, "trainyard"))
}

func copyExecutable(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("copy trainyard: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".trainyard-copy-*")
	if err != nil {
		return "", fmt.Errorf("copy trainyard: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	err = copyFlushing(tmp, in)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return "", fmt.Errorf("copy trainyard to %s: %w", dst, err)
	}
	return dst, nil
}

// flushEvery is how much copyFlushing writes between flushes.
const flushEvery = 8 << 20

// copyFlushing copies in to out, writing each 8 MiB to disk and dropping it (and what was
// read) from the page cache before the next: an init container's memory limit counts its
// page cache, and under cgroup v1 60 MB of dirty pages in a 64 MiB limit got it
// OOM-killed while the node's disk was busy.
func copyFlushing(out, in *os.File) error {
	var done int64
	for {
		n, err := io.CopyN(out, in, flushEvery)
		if n > 0 {
			if serr := out.Sync(); serr != nil {
				return serr
			}
			_ = unix.Fadvise(int(out.Fd()), done, n, unix.FADV_DONTNEED)
			_ = unix.Fadvise(int(in.Fd()), done, n, unix.FADV_DONTNEED)
			done += n
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
