// Command imagebuild writes the test cluster's container images as OCI archives, with no
// Docker engine and no registry (internal/testcluster.BuildImages, internal/ociimage):
//
//	go run ./test/cluster/imagebuild -out bin/images -trainyard bin/trainyard
//
// The folder is a cache: the worker image (a Debian root file system with torch and the
// Fashion-MNIST data, about 2 minutes to make) is kept once written; the small ones are
// rewritten each time. `ctr -n k8s.io images import <archive>` loads one into containerd.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/trainyard/trainyard/internal/ociimage"
	"github.com/trainyard/trainyard/internal/testcluster"
)

func main() {
	out := flag.String("out", "bin/images", "the images folder (a cache)")
	trainyard := flag.String("trainyard", "bin/trainyard", "the static trainyard binary the trainyard image holds")
	flag.Parse()
	if err := run(*out, *trainyard); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(out, trainyard string) error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: imagebuild takes only flags (-out, -trainyard)", flag.Args())
	}
	if st, err := os.Stat(trainyard); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("trainyard binary %s not found: run `make build` first or pass -trainyard <path>", trainyard)
	}
	start := time.Now()
	archives, err := testcluster.BuildImages(out, trainyard)
	if err != nil {
		return err
	}
	for _, a := range archives {
		name, err := ociimage.ImageName(a)
		if err != nil {
			return err
		}
		st, err := os.Stat(a)
		if err != nil {
			return fmt.Errorf("image archive: %w", err)
		}
		fmt.Printf("%-40s %-50s %8.1f MB\n", name, filepath.Clean(a), float64(st.Size())/1e6)
	}
	fmt.Printf("images ready in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}
