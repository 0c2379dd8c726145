package ociimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
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

func blob(t *testing.T, entries map[string][]byte, digest string) []byte {
	t.Helper()
	b, ok := entries[blobPath(digest)]
	if !ok {
		t.Fatalf("blob %s missing", digest)
	}
	sum := sha256.Sum256(b)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		t.Fatalf("blob %s has digest %s", digest, got)
	}
	return b
}

func TestWriteRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "hello")
	if err := os.WriteFile(src, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(dir, "layer.tar")
	files := []File{{Path: "/usr/bin/hello", Source: src}, {Path: "/bin/hi", Link: "/usr/bin/hello"}}
	if err := FilesLayer(layer, files); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	img := Image{Name: "localhost/hello:1", Config: Config{Entrypoint: []string{"/bin/hi"}, User: "65532"}, Layers: []string{layer}}
	if err := Write(out, img); err != nil {
		t.Fatal(err)
	}
	entries := readArchive(t, out)
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(entries["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, entries["index.json"])
	}
	if got := index.Manifests[0].Annotations["io.containerd.image.name"]; got != "localhost/hello:1" {
		t.Errorf("image name annotation %q", got)
	}
	var man struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blob(t, entries, index.Manifests[0].Digest), &man); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Config Config `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blob(t, entries, man.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config.Entrypoint[0] != "/bin/hi" || cfg.Config.User != "65532" {
		t.Errorf("config %+v", cfg.Config)
	}
	if len(man.Layers) != 1 || cfg.RootFS.DiffIDs[0] != man.Layers[0].Digest {
		t.Fatalf("layers %+v, diff IDs %v", man.Layers, cfg.RootFS.DiffIDs)
	}
	layerTar := filepath.Join(dir, "back.tar")
	if err := os.WriteFile(layerTar, blob(t, entries, man.Layers[0].Digest), 0o600); err != nil {
		t.Fatal(err)
	}
	inner := readArchive(t, layerTar)
	if string(inner["usr/bin/hello"]) != "hello" || string(inner["bin/hi"]) != "-> /usr/bin/hello" {
		t.Errorf("layer entries %v", inner)
	}
	if _, ok := inner["usr/bin/"]; !ok {
		t.Errorf("layer lacks the parent folder usr/bin/: %v", inner)
	}
}

func TestWriteRefusesANameWithoutTag(t *testing.T) {
	err := Write(filepath.Join(t.TempDir(), "x.tar"), Image{Name: "localhost/pause"})
	if err == nil || !strings.Contains(err.Error(), "name:tag") {
		t.Fatalf("got %v, want an error asking for name:tag", err)
	}
}
