// Command mkimage writes the trainyard image, the Dockerfile's image made without Docker:
// the static binary alone at /trainyard, run as 65532:65532, as an OCI image-layout
// archive that `ctr images import`, `podman load` and `docker load` (Docker 25 and later)
// take. `make image` runs it.
//
//	go run ./internal/ociimage/mkimage -bin bin/trainyard -name ghcr.io/trainyard/trainyard:v0.5.0 -out bin/trainyard-image.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/trainyard/trainyard/internal/ociimage"
)

func main() {
	bin := flag.String("bin", "bin/trainyard", "the static trainyard binary")
	name := flag.String("name", "", "the image's name with its tag, such as ghcr.io/trainyard/trainyard:v0.5.0")
	out := flag.String("out", "bin/trainyard-image.tar", "the archive to write")
	flag.Parse()
	if err := write(*bin, *name, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func write(bin, name, out string) error {
	dir, err := os.MkdirTemp("", "trainyard-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	layer := filepath.Join(dir, "layer.tar")
	if err := ociimage.FilesLayer(layer, []ociimage.File{{Path: "/trainyard", Source: bin}}); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	return ociimage.Write(out, ociimage.Image{Name: name, Layers: []string{layer},
		Config: ociimage.Config{Entrypoint: []string{"/trainyard"}, User: "65532:65532"}})
}
