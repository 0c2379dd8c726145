package testcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A cluster raises the machine's ARP table thresholds that are too low for a 32-pod gang's
// full mesh on one bridge (the kernel's defaults, 128/512/1024, refused entries and the
// ranks' connections failed with "No route to host"), leaves higher ones alone, and puts
// back what it changed.
func TestRaiseNeighbourLimits(t *testing.T) {
	cases := map[string]struct {
		before, raised map[string]string
	}{
		"the kernel's defaults": {
			before: map[string]string{"gc_thresh1": "128\n", "gc_thresh2": "512\n", "gc_thresh3": "1024\n"},
			raised: map[string]string{"gc_thresh1": "4096", "gc_thresh2": "8192", "gc_thresh3": "16384"},
		},
		"some higher already": {
			before: map[string]string{"gc_thresh1": "128\n", "gc_thresh2": "9000\n", "gc_thresh3": "100000\n"},
			raised: map[string]string{"gc_thresh1": "4096", "gc_thresh2": "9000\n", "gc_thresh3": "100000\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, tc.before)
			restore, err := raiseNeighbourLimits(dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.raised, read(t, dir)); diff != "" {
				t.Errorf("raised (-want +got):\n%s", diff)
			}
			restore()
			want := map[string]string{}
			for k, v := range tc.before {
				want[k] = strings.TrimSpace(v)
			}
			got := read(t, dir)
			for k, v := range got {
				got[k] = strings.TrimSpace(v)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("restored (-want +got):\n%s", diff)
			}
		})
	}
}

// A threshold that cannot be read leaves the others as they were.
func TestRaiseNeighbourLimitsFails(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"gc_thresh1": "128", "gc_thresh2": "512"})
	if _, err := raiseNeighbourLimits(dir); err == nil {
		t.Fatal("no error without gc_thresh3")
	}
	if diff := cmp.Diff(map[string]string{"gc_thresh1": "128", "gc_thresh2": "512"}, read(t, dir)); diff != "" {
		t.Errorf("after the failure (-want +got):\n%s", diff)
	}
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// A node's bridge keeps its MAC address while veths come and go: Linux would otherwise give
// it the lowest of its ports' and change it under the pods' ARP entries for their gateway
// (their DNS lookups were lost for 10-20 s after a pod with a lower MAC came). Needs root,
// as the cluster does.
func TestBridgeKeepsItsMAC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a bridge needs root")
	}
	n := &node{index: 3, bridge: "tytestbr0", ip: "10.244.250.1"}
	tearDownBridge(n.bridge)
	if err := setUpBridge(n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ip("link", "del", "tytestveth0")
		tearDownBridge(n.bridge)
	})
	// A port with a MAC below any other, as a new pod's veth may have.
	if err := ip("link", "add", "tytestveth0", "address", "00:00:00:00:00:01", "type", "veth", "peer", "name", "tytestveth1"); err != nil {
		t.Fatal(err)
	}
	if err := ip("link", "set", "tytestveth0", "master", n.bridge, "up"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("/sys/class/net", n.bridge, "address"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), bridgeMAC(n.index); got != want {
		t.Errorf("the bridge's MAC with a lower port's = %s, want its own %s", got, want)
	}
}
