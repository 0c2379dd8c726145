package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// readArchive returns the archive's entries by name.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		key := hdr.Name
		if hdr.Typeflag == tar.TypeSymlink {
			b = []byte("-> " + hdr.Linkname)
		}
		out[key] = b
	}
}

// blob returns the blob d describes, failing the test unless its digest and size agree.
func blob(t *testing.T, entries map[string][]byte, d descriptor) []byte {
	t.Helper()
	b, ok := entries[blobPath(d.Digest)]
	if !ok {
		t.Fatalf("blob %s missing", d.Digest)
	}
	sum := sha256.Sum256(b)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s (size %d) has digest %s and size %d", d.Digest, d.Size, got, len(b))
	}
	return b
}

// image is an archive read back by readImage, every digest and diff ID checked.
type image struct {
	Annotations map[string]string
	LayerTypes  []string
	Config      Config
	Files       []map[string][]byte // each layer's entries, uncompressed
}

// readImage reads an image archive as containerd would and fails the test unless its
// layout, digests, sizes and diff IDs agree.
func readImage(t *testing.T, path string) image {
	t.Helper()
	entries := readArchive(t, path)
	if got := string(entries["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %q", got)
	}
	var index struct {
		SchemaVersion int          `json:"schemaVersion"`
		Manifests     []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(entries["index.json"], &index); err != nil || len(index.Manifests) != 1 || index.SchemaVersion != 2 {
		t.Fatalf("index.json: %v %s", err, entries["index.json"])
	}
	var man struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blob(t, entries, index.Manifests[0]), &man); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		OS     string `json:"os"`
		Config Config `json:"config"`
		RootFS struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blob(t, entries, man.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.RootFS.Type != "layers" || len(cfg.RootFS.DiffIDs) != len(man.Layers) {
		t.Fatalf("config: os %q, rootfs %+v for %d layers", cfg.OS, cfg.RootFS, len(man.Layers))
	}
	img := image{Annotations: index.Manifests[0].Annotations, Config: cfg.Config}
	for i, l := range man.Layers {
		b := blob(t, entries, l)
		if l.MediaType == mediaLayerGz {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
		}
		sum := sha256.Sum256(b)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != cfg.RootFS.DiffIDs[i] {
			t.Errorf("layer %d: diff ID %s, the tar's digest %s", i, cfg.RootFS.DiffIDs[i], got)
		}
		layerTar := filepath.Join(t.TempDir(), "layer.tar")
		if err := os.WriteFile(layerTar, b, 0o600); err != nil {
			t.Fatal(err)
		}
		img.LayerTypes = append(img.LayerTypes, l.MediaType)
		img.Files = append(img.Files, readArchive(t, layerTar))
	}
	if want := 4 + len(man.Layers); len(entries) != want { // oci-layout, index.json, manifest, config, layers
		t.Errorf("archive has %d entries, want %d", len(entries), want)
	}
	return img
}

func writeTestImage(t *testing.T, gz bool) image {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "hello")
	if err := os.WriteFile(src, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(dir, "layer.tar")
	files := []File{{Path: "/usr/bin/hello", Source: src}, {Path: "/bin/hi", Link: "/usr/bin/hello"},
		{Path: "/etc/motd", Data: []byte("welcome\n"), Mode: 0o644}}
	if err := FilesLayer(layer, files); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "images", "img.tar")
	img := Image{Name: "localhost/hello:1", Layers: []string{layer}, Gzip: gz,
		Config: Config{Entrypoint: []string{"/bin/hi"}, Cmd: []string{"-v"}, Env: []string{"A=1"}, User: "65532", WorkingDir: "/work"}}
	if err := Write(out, img); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(filepath.Dir(out))
	if len(left) != 1 {
		t.Errorf("the images folder holds %d entries, want only the archive (no temporary files left)", len(left))
	}
	return readImage(t, out)
}

func TestWriteRoundTrip(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			img := writeTestImage(t, gz)
			if got := img.Annotations["io.containerd.image.name"]; got != "localhost/hello:1" {
				t.Errorf("image name annotation %q", got)
			}
			if got := img.Annotations["org.opencontainers.image.ref.name"]; got != "1" {
				t.Errorf("ref name annotation %q, want the tag", got)
			}
			want := Config{Entrypoint: []string{"/bin/hi"}, Cmd: []string{"-v"}, Env: []string{"A=1"}, User: "65532", WorkingDir: "/work"}
			if !reflect.DeepEqual(img.Config, want) {
				t.Errorf("config %+v, want %+v", img.Config, want)
			}
			wantType := mediaLayer
			if gz {
				wantType = mediaLayerGz
			}
			if len(img.LayerTypes) != 1 || img.LayerTypes[0] != wantType {
				t.Fatalf("layers %v, want one %s", img.LayerTypes, wantType)
			}
			inner := img.Files[0]
			if string(inner["usr/bin/hello"]) != "hello" || string(inner["bin/hi"]) != "-> /usr/bin/hello" || string(inner["etc/motd"]) != "welcome\n" {
				t.Errorf("layer entries %v", inner)
			}
			if _, ok := inner["usr/bin/"]; !ok {
				t.Errorf("layer lacks the parent folder usr/bin/: %v", inner)
			}
		})
	}
}

// TestWriteGzipIsReproducible: the same layers make the same compressed blob, so an
// image rebuilt from the same files keeps its digest.
func TestWriteGzipIsReproducible(t *testing.T) {
	dir := t.TempDir()
	layer := filepath.Join(dir, "layer.tar")
	if err := FilesLayer(layer, []File{{Path: "/a", Data: bytes.Repeat([]byte("abc"), 1000)}}); err != nil {
		t.Fatal(err)
	}
	var sums []string
	for i := range 2 {
		out := filepath.Join(dir, fmt.Sprintf("img%d.tar", i))
		if err := Write(out, Image{Name: "localhost/a:1", Layers: []string{layer}, Gzip: true}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		sums = append(sums, hex.EncodeToString(sum[:]))
	}
	if sums[0] != sums[1] {
		t.Errorf("two writes of the same image differ: %v", sums)
	}
}

func TestWriteSaysWhichLayerIsMissing(t *testing.T) {
	for _, gz := range []bool{false, true} {
		err := Write(filepath.Join(t.TempDir(), "x.tar"), Image{Name: "localhost/a:1", Layers: []string{"/nonexistent/rootfs.tar"}, Gzip: gz})
		if err == nil || !strings.Contains(err.Error(), "/nonexistent/rootfs.tar") {
			t.Errorf("gzip=%v: got %v, want an error naming the missing layer", gz, err)
		}
	}
}

func TestWriteRefusesANameWithoutTag(t *testing.T) {
	err := Write(filepath.Join(t.TempDir(), "x.tar"), Image{Name: "localhost/pause"})
	if err == nil || !strings.Contains(err.Error(), "name:tag") {
		t.Fatalf("got %v, want an error asking for name:tag", err)
	}
}
