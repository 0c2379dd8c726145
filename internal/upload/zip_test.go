package upload

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	unix.Umask(0o022) // the modes the tests expect
	os.Exit(m.Run())
}

// zipEntry is one entry of a test archive, written as it says even where archive/zip's
// writer would not choose to.
type zipEntry struct {
	hdr  zip.FileHeader
	body []byte
	raw  bool // body is already compressed and hdr holds its sizes and CRC-32
}

// fileEntry is a deflated regular file with mode 0644.
func fileEntry(name, body string) zipEntry {
	e := zipEntry{hdr: zip.FileHeader{Name: name, Method: zip.Deflate}, body: []byte(body)}
	e.hdr.SetMode(0o644)
	return e
}

// dirEntry is a folder.
func dirEntry(name string) zipEntry {
	e := zipEntry{hdr: zip.FileHeader{Name: name}}
	e.hdr.SetMode(fs.ModeDir | 0o755)
	return e
}

// withMode returns e with its mode set to mode.
func (e zipEntry) withMode(mode fs.FileMode) zipEntry {
	e.hdr.SetMode(mode)
	return e
}

// withUnixMode returns e with the Unix mode bits m (file type included) in its header,
// as a crafted archive can hold them.
func (e zipEntry) withUnixMode(m uint32) zipEntry {
	e.hdr.SetMode(0o644) // marks the entry as made on Unix
	e.hdr.ExternalAttrs = m << 16
	return e
}

// stored returns e stored without compression.
func (e zipEntry) stored() zipEntry {
	e.hdr.Method = zip.Store
	return e
}

// symlinkEntry is a symbolic link to target.
func symlinkEntry(name, target string) zipEntry {
	return fileEntry(name, target).withMode(fs.ModeSymlink | 0o777)
}

// lyingEntry is a deflated file holding body whose header claims `claimed` bytes
// unpacked, with the CRC-32 of body (or crc, when it is not 0).
func lyingEntry(name string, body []byte, claimed uint64, crc uint32) zipEntry {
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestCompression)
	_, _ = fw.Write(body)
	_ = fw.Close()
	if crc == 0 {
		crc = crc32.ChecksumIEEE(body)
	}
	e := zipEntry{raw: true, body: buf.Bytes(), hdr: zip.FileHeader{
		Name: name, Method: zip.Deflate, CRC32: crc,
		CompressedSize64: uint64(buf.Len()), UncompressedSize64: claimed,
	}}
	e.hdr.SetMode(0o644)
	return e
}

// rawEntry is an entry written as is, with the given method and flags.
func rawEntry(name string, method, flags uint16, body string) zipEntry {
	e := zipEntry{raw: true, body: []byte(body), hdr: zip.FileHeader{
		Name: name, Method: method, Flags: flags, CRC32: crc32.ChecksumIEEE([]byte(body)),
		CompressedSize64: uint64(len(body)), UncompressedSize64: uint64(len(body)),
	}}
	e.hdr.SetMode(0o644)
	return e
}

// zipOf returns a zip archive of entries.
func zipOf(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		hdr := e.hdr
		create := w.CreateHeader
		if e.raw {
			create = w.CreateRaw
		}
		fw, err := create(&hdr)
		if err != nil {
			t.Fatalf("zip entry %q: %v", e.hdr.Name, err)
		}
		if _, err := fw.Write(e.body); err != nil {
			t.Fatalf("zip entry %q: %v", e.hdr.Name, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// snapshot describes every file and folder under root, by slash-separated path relative
// to root: its type, permissions and, for files, size and SHA-256 of the contents.
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		got[filepath.ToSlash(rel)] = describe(p, info)
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return got
}

// describe describes one file for snapshot.
func describe(path string, info fs.FileInfo) string {
	switch {
	case info.IsDir():
		return fmt.Sprintf("dir %#o", info.Mode().Perm())
	case info.Mode().IsRegular():
		data, err := os.ReadFile(path)
		if err != nil {
			return "unreadable: " + err.Error()
		}
		return fileDesc(info.Mode().Perm(), string(data))
	}
	return "other " + info.Mode().String()
}

// fileDesc is how snapshot describes a regular file with the given mode and contents.
func fileDesc(perm fs.FileMode, contents string) string {
	if len(contents) <= 64 && !strings.ContainsRune(contents, 0) {
		return fmt.Sprintf("file %#o %q", perm, contents)
	}
	return fmt.Sprintf("file %#o %d bytes sha256 %x", perm, len(contents), sha256.Sum256([]byte(contents)))
}
