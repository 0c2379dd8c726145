package client

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/trainyard/trainyard/internal/upload"
)

// Package is a folder zipped for upload, named as Ray's clients name theirs.
type Package struct {
	// Name is "_ray_pkg_<the first 16 hex digits of the zip's SHA-256>.zip".
	Name string
	// Data is the zip archive.
	Data []byte
}

// URI returns the package's URI once uploaded, "gcs://<Name>", as a SubmitRequest's
// WorkingDirPackage names it.
func (p Package) URI() string { return "gcs://" + p.Name }

// PackDir zips the folder dir for upload: its regular files and folders, named relative
// to dir. Symbolic links and other special files are left out; skip, if not nil, is told
// the path of each. A folder bigger than upload.DefaultLimits allows is refused.
func PackDir(dir string, skip func(path string)) (Package, error) {
	return packDir(dir, upload.DefaultLimits(), skip)
}

// packDir is PackDir within the limits lim.
func packDir(dir string, lim upload.Limits, skip func(path string)) (Package, error) {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Package{}, fmt.Errorf("working folder: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return Package{}, fmt.Errorf("working folder: %w", err)
	}
	if !info.IsDir() {
		return Package{}, fmt.Errorf("working folder %s is not a folder", dir)
	}
	var (
		buf          bytes.Buffer
		total, files int64
	)
	zw := zip.NewWriter(&buf)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		if t := d.Type(); t != 0 && t != fs.ModeDir {
			if skip != nil {
				skip(path)
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if files++; files > int64(lim.MaxFiles) {
			return fmt.Errorf("working folder %s holds more than %d files and folders, the most a package may hold", dir, lim.MaxFiles)
		}
		if total += info.Size(); total > lim.MaxTotalBytes {
			return fmt.Errorf("working folder %s holds more than %d bytes, the most a package may unpack to", dir, lim.MaxTotalBytes)
		}
		return addEntry(zw, dir, path, info)
	})
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return Package{}, err
	}
	if int64(buf.Len()) > lim.MaxArchiveBytes {
		return Package{}, fmt.Errorf("working folder %s zips to %d bytes; a package may hold at most %d", dir, buf.Len(), lim.MaxArchiveBytes)
	}
	sum := sha256.Sum256(buf.Bytes())
	return Package{Name: "_ray_pkg_" + hex.EncodeToString(sum[:])[:16] + ".zip", Data: buf.Bytes()}, nil
}

// addEntry writes the file or folder at path, of the folder dir, to zw.
func addEntry(zw *zip.Writer, dir, path string, info fs.FileInfo) error {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return err
	}
	h, err := zip.FileInfoHeader(info)
	if err != nil {
		return err
	}
	h.Name = filepath.ToSlash(rel)
	if info.IsDir() {
		h.Name += "/"
		_, err = zw.CreateHeader(h)
		return err
	}
	h.Method = zip.Deflate
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// HasPackage reports whether the package name (such as "_ray_pkg_<hash>.zip") was
// uploaded to the server.
func (c *Client) HasPackage(ctx context.Context, name string) (bool, error) {
	err := c.do(ctx, request{method: http.MethodGet, path: packagePath(name), want: http.StatusOK}, nil)
	if IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// UploadPackage uploads the zip archive data as the package name, as Ray's clients
// upload a working_dir.
func (c *Client) UploadPackage(ctx context.Context, name string, data []byte) error {
	return c.do(ctx, request{method: http.MethodPut, path: packagePath(name), raw: data, want: http.StatusOK}, nil)
}

// packagePath returns the escaped path of a package's endpoint.
func packagePath(name string) string {
	return "/api/packages/gcs/" + url.PathEscape(name)
}
