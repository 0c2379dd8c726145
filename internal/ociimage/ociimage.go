// Package ociimage writes container images as OCI image-layout archives, the form
// `ctr images import` takes, with no Docker engine and no registry: the test cluster's
// images (internal/testcluster) are built with it from local files and root file systems.
package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Media types of the OCI image spec.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// Config is what the image runs; the fields of an OCI image config's "config".
type Config struct {
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	Env        []string `json:"Env,omitempty"`
	User       string   `json:"User,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

// Image is an image to write: its name (e.g. localhost/pause:1), what it runs, and its
// layers as paths of uncompressed tar files, bottom first.
type Image struct {
	Name   string
	Config Config
	Layers []string
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Write writes img as an OCI image-layout tar archive at out (through a temporary file,
// renamed into place once complete).
func Write(out string, img Image) error {
	if img.Name == "" || !strings.Contains(img.Name, ":") {
		return fmt.Errorf("image name %q: want name:tag, e.g. localhost/pause:1", img.Name)
	}
	layers, diffIDs, err := describeLayers(img.Layers)
	if err != nil {
		return err
	}
	cfg, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config":       img.Config,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	if err != nil {
		return fmt.Errorf("image config of %s: %w", img.Name, err)
	}
	cfgDesc := describeBytes(mediaConfig, cfg)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest, "config": cfgDesc, "layers": layers,
	})
	if err != nil {
		return fmt.Errorf("image manifest of %s: %w", img.Name, err)
	}
	manDesc := describeBytes(mediaManifest, manifest)
	manDesc.Annotations = map[string]string{
		"io.containerd.image.name":          img.Name,
		"org.opencontainers.image.ref.name": img.Name[strings.LastIndex(img.Name, ":")+1:],
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{manDesc},
	})
	if err != nil {
		return fmt.Errorf("image index of %s: %w", img.Name, err)
	}
	return writeArchive(out, func(tw *tar.Writer) error {
		if err := addBytes(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
			return err
		}
		for i, l := range layers {
			if err := addFile(tw, blobPath(l.Digest), img.Layers[i], l.Size); err != nil {
				return err
			}
		}
		if err := addBytes(tw, blobPath(cfgDesc.Digest), cfg); err != nil {
			return err
		}
		if err := addBytes(tw, blobPath(manDesc.Digest), manifest); err != nil {
			return err
		}
		return addBytes(tw, "index.json", index)
	})
}

// describeLayers hashes each layer file; an uncompressed layer's digest is its diff ID.
func describeLayers(paths []string) ([]descriptor, []string, error) {
	var descs []descriptor
	var diffIDs []string
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, nil, fmt.Errorf("image layer: %w", err)
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("image layer %s: %w", p, err)
		}
		d := "sha256:" + hex.EncodeToString(h.Sum(nil))
		descs = append(descs, descriptor{MediaType: mediaLayer, Digest: d, Size: n})
		diffIDs = append(diffIDs, d)
	}
	return descs, diffIDs, nil
}

func describeBytes(mediaType string, b []byte) descriptor {
	sum := sha256.Sum256(b)
	return descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(b))}
}

func blobPath(digest string) string {
	return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:")
}

// writeArchive writes a tar at out through fill, atomically.
func writeArchive(out string, fill func(*tar.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".ociimage-*")
	if err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	if err := fill(tw); err != nil {
		tmp.Close()
		return err
	}
	if err := tw.Close(); err != nil {
		tmp.Close()
		return fmt.Errorf("image archive %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("image archive %s: %w", out, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	return nil
}

func addBytes(tw *tar.Writer, name string, b []byte) error {
	return addReader(tw, name, bytes.NewReader(b), int64(len(b)))
}

func addFile(tw *tar.Writer, name, src string, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	defer f.Close()
	return addReader(tw, name, f, size)
}

func addReader(tw *tar.Writer, name string, r io.Reader, size int64) error {
	hdr := &tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("image archive entry %s: %w", name, err)
	}
	if n, err := io.Copy(tw, r); err != nil || n != size {
		return fmt.Errorf("image archive entry %s: wrote %d of %d bytes: %v", name, n, size, err)
	}
	return nil
}
