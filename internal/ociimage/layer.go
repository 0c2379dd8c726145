package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one entry of a layer built by FilesLayer: a regular file copied from Source or
// holding Data, or, when Link is set, a symbolic link to Link. Parent folders are added
// as needed.
type File struct {
	Path   string // in the image, e.g. /bin/busybox
	Source string // a file on this machine
	Data   []byte // the file's content, when Source is empty
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
	r, size, closeSource, err := openSource(f)
	if err != nil {
		return fmt.Errorf("layer file %s: %w", f.Path, err)
	}
	defer closeSource()
	hdr := &tar.Header{Name: name, Mode: mode, Size: size, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("layer file %s: %w", f.Path, err)
	}
	if _, err := io.CopyN(tw, r, size); err != nil {
		return fmt.Errorf("layer file %s: %w", f.Path, err)
	}
	return nil
}

// openSource returns the content of f, its size and how to close it.
func openSource(f File) (io.Reader, int64, func(), error) {
	if f.Source == "" {
		return bytes.NewReader(f.Data), int64(len(f.Data)), func() {}, nil
	}
	src, err := os.Open(f.Source)
	if err != nil {
		return nil, 0, nil, err
	}
	st, err := src.Stat()
	if err != nil {
		src.Close()
		return nil, 0, nil, err
	}
	return src, st.Size(), func() { src.Close() }, nil
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

// compressLayers gzips each layer into dir in one pass over it, hashing the tar (its diff
// ID) and the compressed blob (its digest) while copying.
func compressLayers(dir string, paths []string) (blobs []string, descs []descriptor, diffIDs []string, err error) {
	for i, p := range paths {
		blob := filepath.Join(dir, fmt.Sprintf("layer-%d.tar.gz", i))
		desc, diffID, err := compressLayer(blob, p)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("image layer %s: %w", p, err)
		}
		blobs = append(blobs, blob)
		descs = append(descs, desc)
		diffIDs = append(diffIDs, diffID)
	}
	return blobs, descs, diffIDs, nil
}

func compressLayer(blob, src string) (descriptor, string, error) {
	in, err := os.Open(src)
	if err != nil {
		return descriptor{}, "", err
	}
	defer in.Close()
	out, err := os.Create(blob)
	if err != nil {
		return descriptor{}, "", err
	}
	defer out.Close()
	tarHash, gzHash := sha256.New(), sha256.New()
	counted := &countingWriter{w: io.MultiWriter(out, gzHash)}
	zw := gzip.NewWriter(counted) // no name and no time in its header: the same bytes each time
	if _, err := io.Copy(io.MultiWriter(zw, tarHash), in); err != nil {
		return descriptor{}, "", err
	}
	if err := zw.Close(); err != nil {
		return descriptor{}, "", err
	}
	if err := out.Close(); err != nil {
		return descriptor{}, "", err
	}
	desc := descriptor{MediaType: mediaLayerGz, Digest: digestOf(gzHash), Size: counted.n}
	return desc, digestOf(tarHash), nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func digestOf(h hash.Hash) string {
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
