package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
func setUpBridge(n *node) error {
	if err := ip("link", "add", n.bridge, "type", "bridge"); err != nil {
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
