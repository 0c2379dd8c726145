package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/ociimage"
	"github.com/trainyard/trainyard/internal/testcluster"
)

// TestImagesRunInContainerd imports each image of the images folder into a containerd of
// its own and runs it: the pause image stays up until killed, busybox runs its applets, the
// worker image imports torch and sees the Fashion-MNIST data, and the trainyard image
// prints its version. It needs root and `make cluster-assets` (containerd, ctr, runc); it
// runs when TRAINYARD_CLUSTER_ASSETS is set and the archives are there (make
// cluster-images writes them).
func TestImagesRunInContainerd(t *testing.T) {
	assets := os.Getenv("TRAINYARD_CLUSTER_ASSETS")
	if assets == "" {
		t.Skip("TRAINYARD_CLUSTER_ASSETS is not set (make test sets it)")
	}
	archives := findArchives(t, filepath.Join(assets, "images"))
	if os.Geteuid() != 0 {
		t.Fatal("running containers needs root")
	}
	for _, bin := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found: make cluster-assets installs Debian's containerd and runc", bin)
		}
	}
	c := startContainerd(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, name := range imageNames {
		start := time.Now()
		if _, err := c.ctr(ctx, "images", "import", archives[name]); err != nil {
			t.Fatalf("import %s: %v", name, err)
		}
		t.Logf("imported %s in %s", name, time.Since(start).Round(time.Millisecond))
	}
	for _, tc := range runs {
		t.Run(tc.image, func(t *testing.T) {
			start := time.Now()
			id := fmt.Sprintf("imagebuild-%d-%s", os.Getpid(), tc.id)
			out, err := c.run(ctx, false, tc.image, id, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("%s printed %q, want it to contain %q", tc.image, out, want)
				}
			}
			t.Logf("ran %s in %s: %s", tc.image, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
		})
	}
	t.Run(testcluster.PauseImage, func(t *testing.T) { pauseStaysUp(ctx, t, c) })
}

// imageNames are the images the folder must hold.
var imageNames = []string{testcluster.PauseImage, testcluster.BusyboxImage, testcluster.TrainyardImage, testcluster.WorkerImage}

// runs are the commands run in each image, and what they must print.
var runs = []struct {
	image, id string
	args      []string
	want      []string
}{
	{testcluster.BusyboxImage, "busybox", []string{"/bin/sh", "-c", "echo hello from busybox; ls /bin/nslookup /bin/wget"},
		[]string{"hello from busybox", "/bin/nslookup", "/bin/wget"}},
	{testcluster.WorkerImage, "worker", []string{"python3", "-c",
		"import os, torch; print('torch', torch.__version__, sorted(os.listdir('/usr/share/datasets/fashion-mnist')))"},
		[]string{"torch 1.13", "train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}},
	{testcluster.TrainyardImage, "trainyard", []string{"/trainyard", "version"}, []string{"trainyard"}},
}

// pauseStaysUp starts the pause image as the sandbox would (its own entrypoint), sees it
// running, and kills it.
func pauseStaysUp(ctx context.Context, t *testing.T, c *containerd) {
	id := fmt.Sprintf("imagebuild-%d-pause", os.Getpid())
	if _, err := c.run(ctx, true, testcluster.PauseImage, id); err != nil {
		t.Fatal(err)
	}
	defer c.ctr(context.Background(), "containers", "rm", id)
	time.Sleep(time.Second) // long enough for an entrypoint that exits at once to have done so
	out, err := c.ctr(ctx, "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, id) || !strings.Contains(out, "RUNNING") {
		t.Errorf("the pause container is not running a second after it started: %s", out)
	}
	if _, err := c.ctr(ctx, "tasks", "delete", "--force", id); err != nil {
		t.Error(err)
	}
}

// findArchives maps each image of imageNames to its archive in dir, skipping the test
// when one is missing.
func findArchives(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.tar"))
	found := map[string]string{}
	for _, p := range paths {
		if name, err := ociimage.ImageName(p); err == nil {
			found[name] = p
		}
	}
	for _, name := range imageNames {
		if found[name] == "" {
			t.Skipf("no archive of %s in %s: make cluster-images writes them", name, dir)
		}
	}
	return found
}
