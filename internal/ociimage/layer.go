package ociimage

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// File is one entry of a layer built by FilesLayer: a regular file copied from Source, or,
// when Link is set, a symbolic link to Link. Parent folders are added as needed.
type File struct {
	Path   string // in the image, e.g. /bin/busybox
	Source string // a file on this machine
	Link   string // the target of a symbolic link
	Mode   int64  // permission bits; 0 means 0755
}

// FilesLayer writes a layer tar holding files to out.
func FilesLayer(out string, files []File) error {
	return writeArchive(out, func(tw *tar.Writer) error {
		for _, dir := range parents(files) {
			hdr := &tar.Header{Name: dir + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}
			if err := tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("layer folder %s: %w", dir, err)
			}
		}
		for _, f := range files {
			if err := addEntry(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
}

func addEntry(tw *tar.Writer, f File) error {
	name := strings.TrimPrefix(path.Clean(f.Path), "/")
	mode := f.Mode
	if mode == 0 {
		mode = 0o755
	}
	if f.Link != "" {
		hdr := &tar.Header{Name: name, Linkname: f.Link, Mode: 0o777, Typeflag: tar.TypeSymlink, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("layer link %s: %w", f.Path, err)
		}
		return nil
	}
	st, err := os.Stat(f.Source)
	if err != nil {
		return fmt.Errorf("layer file %s: %w", f.Path, err)
	}
	src, err := os.Open(f.Source)
	if err != nil {
		return fmt.Errorf("layer file %s: %w", f.Path, err)
	}
	defer src.Close()
	hdr := &tar.Header{Name: name, Mode: mode, Size: st.Size(), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("layer file %s: %w", f.Path, err)
	}
	if _, err := io.CopyN(tw, src, st.Size()); err != nil {
		return fmt.Errorf("layer file %s: %w", f.Path, err)
	}
	return nil
}

// parents lists the folders the files need, sorted so that a parent comes first.
func parents(files []File) []string {
	seen := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(strings.TrimPrefix(path.Clean(f.Path), "/")); d != "." && d != "/"; d = path.Dir(d) {
			seen[d] = true
		}
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}
