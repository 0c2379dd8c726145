// Package cluster holds the tests that run on a real single-node Kubernetes cluster
// (internal/testcluster): real pods on kubelet, containerd and runc, CoreDNS, the
// operator as a pod. They need root and the binaries of `make cluster-assets`; `make
// test` sets TRAINYARD_CLUSTER_ASSETS, and then a cluster that cannot start fails the
// tests with the reason. Without it they are skipped.
package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainyard/trainyard/internal/testcluster"
)

// gpus is the node's advertised nvidia.com/gpu capacity.
const gpus = 4

// cl is the package's cluster; nil when the tests are skipped.
var cl *testcluster.Cluster

// skipReason says why the tests are skipped, when they are.
var skipReason string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	assets := os.Getenv("TRAINYARD_CLUSTER_ASSETS")
	if assets == "" {
		skipReason = "TRAINYARD_CLUSTER_ASSETS is not set (make test sets it after make cluster-assets)"
		return m.Run()
	}
	bin := os.Getenv("TRAINYARD_BIN")
	if bin == "" {
		bin = filepath.Join(assets, "trainyard")
	}
	ctrllog.SetLogger(logr.Discard()) // the controller-runtime clients the tests make
	start := time.Now()
	images, err := testcluster.BuildImages(filepath.Join(assets, "images"), bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test cluster images:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err = testcluster.Start(ctx, testcluster.Config{Assets: assets, Root: "/tmp/trainyard-testcluster", Images: images, GPUs: gpus})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "test cluster up in %s (images and start)\n", time.Since(start).Round(time.Millisecond))
	code := m.Run()
	stop := time.Now()
	cl.Stop()
	fmt.Fprintf(os.Stderr, "test cluster stopped in %s\n", time.Since(stop).Round(time.Millisecond))
	return code
}

// cluster returns the package's cluster or skips the test.
func cluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	if cl == nil {
		t.Skip(skipReason)
	}
	return cl
}
