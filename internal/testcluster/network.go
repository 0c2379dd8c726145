package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The cluster's network: pods on a bridge of their own, never touching eth0. The node's
// address is the bridge's; the API server listens on the kubernetes Service's address,
// also on the bridge, so pods reach it with no kube-proxy.
const (
	bridgeName  = "cni0"
	nodeIP      = "10.244.0.1"
	podCIDR     = "10.244.0.0/24"
	apiServerIP = "10.96.0.1"
	serviceCIDR = "10.96.0.0/16"
)

// ip runs `ip args...`.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setUpBridge creates the bridge with the node's and the API server's addresses.
func setUpBridge() error {
	if err := ip("link", "add", bridgeName, "type", "bridge"); err != nil {
		return err
	}
	for _, a := range []string{nodeIP + "/24", apiServerIP + "/32"} {
		if err := ip("addr", "add", a, "dev", bridgeName); err != nil {
			return err
		}
	}
	if err := ip("link", "set", bridgeName, "up"); err != nil {
		return err
	}
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
}

// tearDownNetwork removes the pods' network namespaces, their veths and the bridge.
// Errors are ignored: the parts may be gone already.
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
	if links, err := filepath.Glob("/sys/class/net/" + bridgeName + "/brif/*"); err == nil {
		for _, l := range links {
			_ = ip("link", "del", filepath.Base(l))
		}
	}
	if _, err := os.Stat("/sys/class/net/" + bridgeName); err == nil {
		_ = ip("link", "del", bridgeName)
	}
}

// cniConfig is the pods' network: the bridge plugin on cni0 with host-local addresses.
func cniConfig(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "trainyard-testcluster",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "hairpinMode": true, "ipMasq": false,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]],
              "routes": [{"dst": "0.0.0.0/0"}]}}
  ]
}
`, bridgeName, ipamDir, podCIDR, nodeIP)
}
