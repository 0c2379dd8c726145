package podworker

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	_, err = io.Copy(tmp, in)
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
