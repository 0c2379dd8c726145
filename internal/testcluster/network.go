package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The cluster's network: each node's pods on a bridge of its own (cni0 for the first
// node, cni1 for the second, ...), never touching eth0. A node's address is its bridge's
// (10.244.<i>.1, its pods in 10.244.<i>.0/24); the host routes between the bridges, as
// a cluster's network routes between nodes' pod CIDRs. The API server listens on the
// kubernetes Service's address, on the first node's bridge, so pods reach it with no
// kube-proxy; CoreDNS listens on the first node's address, which pods of every node reach
// through their bridge's gateway.
const (
	nodeIP      = "10.244.0.1"
	apiServerIP = "10.96.0.1"
	serviceCIDR = "10.96.0.0/16"
	// maxNodes bounds the nodes a cluster can have (bridges cni0 to cni3).
	maxNodes = 4
)

// ip runs `ip args...`.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setUpBridge creates a node's bridge with the node's address (and, for the first node,
// the API server's) and turns on forwarding between the bridges.
//
// The bridge gets a MAC address of its own (bridgeMAC). Without one, Linux gives a bridge
// the lowest MAC among its ports, and that changes whenever a pod's veth with a lower one
// comes or goes: the pods' ARP entries for their gateway (which is also the DNS server)
// then name a MAC no port has, and their packets to it are lost until the entry is probed
// again, seconds later. A pod that had been running (a gang going on in place after a
// resize) lost its DNS lookups for 10 to 20 s that way.
func setUpBridge(n *node) error {
	if err := ip("link", "add", n.bridge, "type", "bridge"); err != nil {
		return err
	}
	if err := ip("link", "set", "dev", n.bridge, "address", bridgeMAC(n.index)); err != nil {
		return err
	}
	addrs := []string{n.ip + "/24"}
	if n.index == 0 {
		addrs = append(addrs, apiServerIP+"/32")
	}
	for _, a := range addrs {
		if err := ip("addr", "add", a, "dev", n.bridge); err != nil {
			return err
		}
	}
	if err := ip("link", "set", n.bridge, "up"); err != nil {
		return err
	}
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
}

// bridgeMAC is node i's bridge's MAC address: locally administered, unicast, and fixed, so
// that it never changes while pods come and go (see setUpBridge).
func bridgeMAC(i int) string {
	return fmt.Sprintf("02:74:79:00:00:%02x", i+1)
}

// tearDownNetwork removes the pods' network namespaces, their veths and every node's
// bridge. Errors are ignored: the parts may be gone already.
func tearDownNetwork() {
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "cni-") {
				p := filepath.Join("/run/netns", e.Name())
				_ = unix.Unmount(p, unix.MNT_DETACH)
				_ = os.Remove(p)
			}
		}
	}
	for i := range maxNodes {
		tearDownBridge(fmt.Sprintf("cni%d", i))
	}
}

// tearDownBridge removes a bridge and the veths on it.
func tearDownBridge(bridge string) {
	if links, err := filepath.Glob("/sys/class/net/" + bridge + "/brif/*"); err == nil {
		for _, l := range links {
			_ = ip("link", "del", filepath.Base(l))
		}
	}
	if _, err := os.Stat("/sys/class/net/" + bridge); err == nil {
		_ = ip("link", "del", bridge)
	}
}

// cniConfig is a node's pod network: the bridge plugin on the node's bridge with
// host-local addresses from its pod CIDR.
func cniConfig(n *node) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "trainyard-testcluster",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "hairpinMode": true, "ipMasq": false,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]],
              "routes": [{"dst": "0.0.0.0/0"}]}}
  ]
}
`, n.bridge, n.path("cni", "ipam"), n.podCIDR, n.ip)
}

// neighbourDir holds the kernel's ARP table thresholds (net.ipv4.neigh.default).
const neighbourDir = "/proc/sys/net/ipv4/neigh/default"

// neighbourLimits are the ARP table thresholds a cluster raises the machine's to, as large
// nodes' images do (GKE's). Linux keeps one table for the host and every pod's network
// namespace together, and past gc_thresh3 (1024 by default) it adds no entry ("neighbour:
// arp_cache: neighbor table overflow!" in the kernel log): a pod's connection to a peer it
// has no entry for fails with "No route to host". All pods of a node share its bridge, so a
// gang whose ranks all connect to each other (gloo's full mesh) needs an entry per pair:
// 32 workers need 32 × 31 in the pods, one for the gateway in each and one per pod in the
// host, about 1,060. A real node holds a few pods, and reaches other nodes' through its
// gateway; one node holding the whole gang is this cluster's own.
var neighbourLimits = []struct {
	name string
	min  int
}{{"gc_thresh1", 4096}, {"gc_thresh2", 8192}, {"gc_thresh3", 16384}}

// raiseNeighbourLimits raises the thresholds in dir (neighbourDir) that are below
// neighbourLimits and returns what puts them back; those already higher are left alone.
func raiseNeighbourLimits(dir string) (restore func(), err error) {
	var undo []func()
	restore = func() {
		for _, u := range slices.Backward(undo) {
			u()
		}
	}
	for _, l := range neighbourLimits {
		path := filepath.Join(dir, l.name)
		b, err := os.ReadFile(path)
		if err != nil {
			restore()
			return nil, fmt.Errorf("ARP table threshold: %w", err)
		}
		old, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			restore()
			return nil, fmt.Errorf("ARP table threshold %s: %q is not a number", path, b)
		}
		if old >= l.min {
			continue
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(l.min)), 0o644); err != nil {
			restore()
			return nil, fmt.Errorf("raise the ARP table threshold %s to %d: %w", path, l.min, err)
		}
		undo = append(undo, func() { _ = os.WriteFile(path, []byte(strconv.Itoa(old)), 0o644) })
	}
	return restore, nil
}
