package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/trainyard/trainyard/internal/ociimage"
)

// Image names the cluster's tests use; every pod asks imagePullPolicy IfNotPresent or
// Never, since nothing can be pulled.
const (
	BusyboxImage   = "localhost/busybox:1"
	TrainyardImage = "localhost/trainyard:test"
	// WorkerImage has Debian's python3 and torch and the Fashion-MNIST data.
	WorkerImage = "localhost/trainyard-worker:torch-1.13"
)

// busyboxApplets are the commands the busybox image links to /bin/busybox.
var busyboxApplets = []string{"sh", "sleep", "nc", "wget", "cat", "ls", "nslookup", "echo", "hostname",
	"kill", "ps", "env", "mkdir", "cp", "rm", "test", "true", "false", "grep", "touch", "date", "id",
	"tail", "head", "timeout", "ip", "ifconfig", "pkill", "pgrep"}

// BuildImages writes the test images into dir and returns their archives, the pause
// image's first: pause and busybox from Debian's busybox-static, the trainyard image from
// the binary at trainyard (rewritten each time), and the worker image from a Debian root
// file system made by mmdebstrap (kept: about 2 minutes and 1.3 GB to make).
func BuildImages(dir, trainyard string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("images folder: %w", err)
	}
	bb, err := busyboxLayer(dir)
	if err != nil {
		return nil, err
	}
	pause := filepath.Join(dir, "pause-1.tar")
	// The sandbox's process only has to stay; containerd stops it with SIGKILL.
	if err := ociimage.Write(pause, ociimage.Image{Name: PauseImage, Layers: []string{bb},
		Config: ociimage.Config{Entrypoint: []string{"/bin/sleep", "2147483647"}}}); err != nil {
		return nil, err
	}
	busybox := filepath.Join(dir, "busybox-1.tar")
	if err := ociimage.Write(busybox, ociimage.Image{Name: BusyboxImage, Layers: []string{bb},
		Config: ociimage.Config{Cmd: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}}}); err != nil {
		return nil, err
	}
	ty, err := trainyardImage(dir, trainyard)
	if err != nil {
		return nil, err
	}
	worker, err := workerImage(dir)
	if err != nil {
		return nil, err
	}
	return []string{pause, busybox, ty, worker}, nil
}

func busyboxLayer(dir string) (string, error) {
	files := []ociimage.File{{Path: "/bin/busybox", Source: "/bin/busybox"}, {Path: "/tmp/.keep", Source: "/dev/null", Mode: 0o644}}
	for _, a := range busyboxApplets {
		files = append(files, ociimage.File{Path: "/bin/" + a, Link: "busybox"})
	}
	layer := filepath.Join(dir, "busybox-layer.tar")
	if err := ociimage.FilesLayer(layer, files); err != nil {
		return "", fmt.Errorf("busybox layer (is busybox-static installed?): %w", err)
	}
	return layer, nil
}

// trainyardImage is the Dockerfile's image: the static binary, run as 65532.
func trainyardImage(dir, bin string) (string, error) {
	layer := filepath.Join(dir, "trainyard-layer.tar")
	if err := ociimage.FilesLayer(layer, []ociimage.File{{Path: "/trainyard", Source: bin}}); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "trainyard-test.tar")
	err := ociimage.Write(out, ociimage.Image{Name: TrainyardImage, Layers: []string{layer},
		Config: ociimage.Config{Entrypoint: []string{"/trainyard"}, User: "65532:65532"}})
	return out, err
}

// workerPackages are the worker image's Debian packages.
var workerPackages = []string{"python3", "python3-torch", "python3-numpy", "libopenblas0-pthread", "dataset-fashion-mnist"}

// workerImage makes (once) a Debian bookworm root file system with torch and the data.
func workerImage(dir string) (string, error) {
	out := filepath.Join(dir, "trainyard-worker-torch-1.13.tar")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	rootfs := filepath.Join(dir, "worker-rootfs.tar")
	args := []string{"--variant=essential", "--include=" + strings.Join(workerPackages, ","),
		`--aptopt=APT::Install-Recommends "false"`,
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-exclude=/usr/share/info/*",
		"bookworm", rootfs,
		"deb http://deb.debian.org/debian bookworm main",
		"deb http://deb.debian.org/debian bookworm-updates main",
		"deb http://deb.debian.org/debian-security bookworm-security main"}
	if b, err := exec.Command("mmdebstrap", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("worker image: mmdebstrap: %v: %s", err, tailString(string(b), 2000))
	}
	defer os.Remove(rootfs)
	err := ociimage.Write(out, ociimage.Image{Name: WorkerImage, Layers: []string{rootfs},
		Config: ociimage.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, Cmd: []string{"/bin/bash"}}})
	return out, err
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
