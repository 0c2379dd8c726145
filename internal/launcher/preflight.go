package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// Preflight checks what a valid job needs from this machine before anything starts: the
// working folder exists, the command can be found and run, and the storage path can be
// written. It changes nothing on disk.
func Preflight(job *v1.TrainJob) error {
	s := &job.Spec
	if err := checkDir(s.WorkingDir); err != nil {
		return fmt.Errorf("working folder (--workdir): %w", err)
	}
	if _, err := LookPath(job); err != nil {
		return err
	}
	if err := checkWritable(s.StoragePath); err != nil {
		return fmt.Errorf("storage path (--storage-path) %s: %w", s.StoragePath, err)
	}
	return nil
}

func checkDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	return nil
}

// LookPath finds the job's program as the workers will: a name with a slash is taken
// relative to the working folder, a bare name is searched in the PATH the workers get.
func LookPath(job *v1.TrainJob) (string, error) {
	name := job.Spec.Command[0]
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(job.Spec.WorkingDir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("command %q: %w", name, err)
		}
		return p, nil
	}
	path := os.Getenv("PATH")
	for _, e := range job.Spec.Env {
		if e.Name == "PATH" {
			path = e.Value
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(job.Spec.WorkingDir, dir)
		}
		if p := filepath.Join(dir, name); checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q: not found in PATH (%s)", name, path)
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s does not exist", p)
		}
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a folder", p)
	}
	if unix.Access(p, unix.X_OK) != nil {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

// checkWritable reports whether dir, or the nearest folder above it that exists, can be
// written, without creating anything.
func checkWritable(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s is not a folder", p)
			}
			if unix.Access(p, unix.W_OK|unix.X_OK) != nil {
				return fmt.Errorf("%s is not writable", p)
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			return err
		}
		if p == filepath.Dir(p) {
			return fmt.Errorf("no folder of %s exists", dir)
		}
	}
}
