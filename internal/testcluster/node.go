package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// GPUTaint is the taint GPU node pools carry (GKE's, AKS's and the NVIDIA GPU operator's
// convention). The API server's ExtendedResourceToleration admission plugin gives every
// pod that asks for nvidia.com/gpu the toleration, so only GPU pods land on such nodes.
var GPUTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// NodeConfig says what a node added with AddNode holds.
type NodeConfig struct {
	// GPUs is the node's nvidia.com/gpu capacity (advertised, no device behind it).
	GPUs int
	// Taints are registered with the node (kubelet's --register-with-taints).
	Taints []corev1.Taint
}

// node is one kubelet with a containerd of its own (kubelet kills the containers of pods
// it does not know, so two kubelets cannot share one), a bridge and pod CIDR of its own,
// and a cgroup parent of its own (both kubelets would otherwise own /kubepods). Node i
// (from 0) is 10.244.i.1 on bridge cni<i>; the first is NodeName, with its state in the
// cluster's root as before there were several; the others are trainyard-node-<i+1>, with
// their state in <root>/<name> and cgroups under /<name>.
type node struct {
	index   int
	name    string
	ip      string
	bridge  string
	podCIDR string
	dir     string
	// cgroupParent is kubelet's cgroupRoot below the hierarchies' root; "" for the first
	// node (kubelet's default, /).
	cgroupParent string
	cfg          NodeConfig
	imported     bool
	// containerd and kubelet are its running processes; nil while the node is stopped.
	containerd, kubelet *component
}

func (c *Cluster) newNode(index int, cfg NodeConfig) *node {
	n := &node{index: index, name: NodeName, ip: fmt.Sprintf("10.244.%d.1", index), bridge: fmt.Sprintf("cni%d", index),
		podCIDR: fmt.Sprintf("10.244.%d.0/24", index), dir: c.root, cfg: cfg}
	if index > 0 {
		n.name = fmt.Sprintf("%s-%d", NodeName, index+1)
		n.dir = c.path(n.name)
		n.cgroupParent = n.name
	}
	return n
}

func (n *node) path(parts ...string) string {
	return filepath.Join(append([]string{n.dir}, parts...)...)
}

func (n *node) sock() string { return n.path("containerd", "containerd.sock") }

// component names a node's process: "containerd" and "kubelet" for the first node,
// "kubelet-trainyard-node-2" for the second.
func (n *node) component(name string) string {
	if n.index == 0 {
		return name
	}
	return name + "-" + n.name
}

// kubepods is the node's pod cgroup below the hierarchies' root.
func (n *node) kubepods() string { return filepath.Join(n.cgroupParent, "kubepods") }

// AddNode starts one more node: its bridge, containerd (with the cluster's images
// imported: about 30 s for the worker image), and kubelet; it returns the node's name
// once the node is Ready with its GPUs allocatable.
func (c *Cluster) AddNode(ctx context.Context, cfg NodeConfig) (string, error) {
	if len(c.nodes) >= maxNodes {
		return "", fmt.Errorf("a test cluster has at most %d nodes", maxNodes)
	}
	n := c.newNode(len(c.nodes), cfg)
	if err := c.pki.issue(n.component("kubelet"), "system:node:"+n.name, []string{"system:nodes"}, []net.IP{net.ParseIP(n.ip)}, []string{n.name}); err != nil {
		return "", err
	}
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		return "", fmt.Errorf("node folder: %w", err)
	}
	if err := c.pki.kubeconfig(n.path("kubelet.kubeconfig"), "https://"+apiServerIP+":443", n.component("kubelet")); err != nil {
		return "", err
	}
	c.nodes = append(c.nodes, n)
	if err := setUpBridge(n); err != nil {
		return "", fmt.Errorf("node %s's pod network: %w", n.name, err)
	}
	if err := makeCgroupParent(n.cgroupParent); err != nil {
		return "", fmt.Errorf("node %s: %w", n.name, err)
	}
	if err := c.startNode(ctx, n); err != nil {
		return "", fmt.Errorf("node %s (logs in %s): %w", n.name, c.path("logs"), err)
	}
	return n.name, nil
}

// StopNode loses a node as a machine is lost: its kubelet SIGKILLed, every process of its
// pods killed, its containerd and shims killed, and its pods' veths removed (their
// addresses stop answering). The Node object stays; kube-controller-manager marks it
// NotReady after its node-monitor-grace-period (20 s here) and taints it unreachable.
// StartNode brings it back.
func (c *Cluster) StopNode(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if n.kubelet == nil {
		return fmt.Errorf("node %s is stopped already", name)
	}
	c.stopNode(n, 0)
	if links, err := filepath.Glob("/sys/class/net/" + n.bridge + "/brif/*"); err == nil {
		for _, l := range links {
			_ = ip("link", "del", filepath.Base(l))
		}
	}
	return ctx.Err()
}

// StartNode starts a stopped node again (its containerd keeps its images) and waits until
// it is Ready with its GPUs advertised again.
func (c *Cluster) StartNode(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if n.kubelet != nil {
		return fmt.Errorf("node %s runs already", name)
	}
	return c.startNode(ctx, n)
}

// RemoveNode stops a node added with AddNode, deletes its Node object and removes its
// bridge, cgroups and state folder (its logs stay in Root()/logs).
func (c *Cluster) RemoveNode(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if n.index == 0 || n.index != len(c.nodes)-1 {
		return fmt.Errorf("only the last added node can be removed, not %s", name)
	}
	c.stopNode(n, 10*time.Second)
	c.nodes = c.nodes[:len(c.nodes)-1]
	tearDownBridge(n.bridge)
	removeCgroupParent(n.cgroupParent)
	unmountUnder(n.dir)
	if err := os.RemoveAll(n.dir); err != nil {
		return fmt.Errorf("remove node %s's folder: %w", name, err)
	}
	err = c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	return nil
}

// Nodes are the names of the cluster's nodes, the first node's first.
func (c *Cluster) Nodes() []string {
	var names []string
	for _, n := range c.nodes {
		names = append(names, n.name)
	}
	return names
}

func (c *Cluster) node(name string) (*node, error) {
	for _, n := range c.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %s in the test cluster", name)
}

// startNode starts the node's containerd (importing the images the first time) and
// kubelet, and waits until the node is Ready with its GPUs advertised.
func (c *Cluster) startNode(ctx context.Context, n *node) error {
	for _, d := range []string{"cni/net.d", "cni/ipam", "containerd", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(n.path(d), 0o700); err != nil {
			return fmt.Errorf("node folder: %w", err)
		}
	}
	if err := c.startContainerd(ctx, n); err != nil {
		return err
	}
	if !n.imported {
		if err := c.importImages(ctx, n); err != nil {
			return err
		}
		n.imported = true
	}
	if err := c.startKubelet(ctx, n); err != nil {
		return err
	}
	return c.AdvertiseGPUs(ctx, n.name, n.cfg.GPUs)
}

// stopNode stops the node's kubelet (SIGTERM, then SIGKILL after grace; at once when
// grace is 0), kills its pods' processes, then its containerd and shims.
func (c *Cluster) stopNode(n *node, grace time.Duration) {
	c.stopComponent(n.kubelet, grace)
	killPods(n.kubepods())
	c.stopComponent(n.containerd, grace)
	killShims(n.sock())
	n.kubelet, n.containerd = nil, nil
}

// stopComponent stops comp (if any) and drops it from those waitFor watches.
func (c *Cluster) stopComponent(comp *component, grace time.Duration) {
	if comp == nil {
		return
	}
	comp.stop(grace)
	c.forget(comp)
}

// forget drops a stopped component from those waitFor watches.
func (c *Cluster) forget(comp *component) {
	for i, cc := range c.components {
		if cc == comp {
			c.components = append(c.components[:i], c.components[i+1:]...)
			return
		}
	}
}

// startContainerd starts Debian's containerd with everything under the node's folder.
// restrict_oom_score_adj: these VMs lack CAP_SYS_RESOURCE, so runc could not set a
// negative oom_score_adj.
func (c *Cluster) startContainerd(ctx context.Context, n *node) error {
	sock := n.sock()
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, n.path("containerd", "root"), n.path("containerd", "state"), sock, sock+".ttrpc", PauseImage, n.path("cni", "net.d"))
	if err := os.WriteFile(n.path("containerd", "config.toml"), []byte(config), 0o600); err != nil {
		return fmt.Errorf("containerd config: %w", err)
	}
	if err := os.WriteFile(n.path("cni", "net.d", "10-trainyard.conflist"), []byte(cniConfig(n)), 0o600); err != nil {
		return fmt.Errorf("CNI config: %w", err)
	}
	comp, err := c.start(n.component("containerd"), c.bins.containerd, "--config", n.path("containerd", "config.toml"))
	if err != nil {
		return err
	}
	n.containerd = comp
	return c.waitFor(n.component("containerd"), 30*time.Second, func() (bool, error) {
		out, err := exec.CommandContext(ctx, c.bins.ctr, "-a", sock, "version").CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("ctr version: %v: %s", err, out)
		}
		return true, nil
	})
}

// importImages imports the cluster's OCI archives into the node's containerd (namespace
// k8s.io, the CRI's).
func (c *Cluster) importImages(ctx context.Context, n *node) error {
	for _, img := range c.images {
		out, err := exec.CommandContext(ctx, c.bins.ctr, "-a", n.sock(), "-n", "k8s.io", "images", "import", img).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import image %s into %s: %v: %s", img, n.name, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// startKubelet starts the node's kubelet and waits for the node to be Ready. Two kubelets
// on one host differ in their address (where each serves port 10250 and healthz), root,
// cert and pod-log folders, runtime, and cgroupRoot; both write
// /var/lib/kubelet/device-plugins whatever their root (harmless: no device plugin
// registers, and each serves its registration socket from the listener it opened).
func (c *Cluster) startKubelet(ctx context.Context, n *node) error {
	extra := ""
	if n.index > 0 {
		extra = fmt.Sprintf("cgroupRoot: /%s\nhealthzBindAddress: %s\n", n.cgroupParent, n.ip)
	}
	config := fmt.Sprintf(`kind: KubeletConfiguration
apiVersion: kubelet.config.k8s.io/v1beta1
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: %s}}
authorization: {mode: Webhook}
clusterDNS: [%s]
clusterDomain: cluster.local
address: %s
failSwapOn: false
podLogsDir: %s
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
%s`, n.sock(), c.pki.path("ca.crt"), nodeIP, n.ip, n.path("pod-logs"), extra)
	if err := os.WriteFile(n.path("kubelet", "config.yaml"), []byte(config), 0o600); err != nil {
		return fmt.Errorf("kubelet config: %w", err)
	}
	args := []string{"--config", n.path("kubelet", "config.yaml"),
		"--kubeconfig", n.path("kubelet.kubeconfig"), "--hostname-override", n.name,
		"--node-ip", n.ip, "--root-dir", n.path("kubelet", "root"), "--cert-dir", n.path("kubelet", "pki")}
	if len(n.cfg.Taints) > 0 {
		var ts []string
		for _, t := range n.cfg.Taints {
			ts = append(ts, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
		}
		args = append(args, "--register-with-taints", strings.Join(ts, ","))
	}
	comp, err := c.start(n.component("kubelet"), c.bins.kubelet, args...)
	if err != nil {
		return err
	}
	n.kubelet = comp
	return c.waitFor("node "+n.name+" Ready", 2*time.Minute, func() (bool, error) {
		got, err := c.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeReady(got), nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// AdvertiseGPUs sets the node's nvidia.com/gpu capacity (no device plugin here: a status
// patch) and waits until kubelet copies it to allocatable. It is kept for the node: a
// node started again advertises it again (kubelet may zero extended resources when it
// registers anew).
func (c *Cluster) AdvertiseGPUs(ctx context.Context, name string, gpus int) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	n.cfg.GPUs = gpus
	if gpus == 0 {
		return nil
	}
	patch := fmt.Sprintf(`[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"%d"}]`, gpus)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("advertise %d GPUs on node %s: %w", gpus, name, err)
	}
	return c.waitFor("nvidia.com/gpu in node "+name+"'s allocatable", time.Minute, func() (bool, error) {
		got, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := got.Status.Allocatable["nvidia.com/gpu"]
		return q.Value() == int64(gpus), nil
	})
}

// Taint adds the taint to the node (replacing one with the same key and effect).
func (c *Cluster) Taint(ctx context.Context, name string, taint corev1.Taint) error {
	return c.updateTaints(ctx, name, func(ts []corev1.Taint) []corev1.Taint {
		return append(withoutTaint(ts, taint), taint)
	})
}

// Untaint removes the taint (by key and effect) from the node.
func (c *Cluster) Untaint(ctx context.Context, name string, taint corev1.Taint) error {
	return c.updateTaints(ctx, name, func(ts []corev1.Taint) []corev1.Taint { return withoutTaint(ts, taint) })
}

func (c *Cluster) updateTaints(ctx context.Context, name string, change func([]corev1.Taint) []corev1.Taint) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = change(n.Spec.Taints)
		_, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("taints of node %s: %w", name, err)
	}
	return nil
}

func withoutTaint(ts []corev1.Taint, taint corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range ts {
		if t.Key != taint.Key || t.Effect != taint.Effect {
			out = append(out, t)
		}
	}
	return out
}

// makeCgroupParent creates a node's cgroup parent in every cgroup v1 hierarchy (kubelet
// refuses a cgroupRoot that does not exist), with the root's CPUs and memory nodes in
// cpuset (a new cpuset cgroup has none).
func makeCgroupParent(parent string) error {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue // not a hierarchy
		}
		dir := filepath.Join(h, parent)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupParent removes a node's cgroup parent (empty once its pods were killed).
func removeCgroupParent(parent string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", parent))
	for _, d := range dirs {
		_ = syscall.Rmdir(d)
	}
}

// NodeRSS is the resident memory, in bytes, of the node's kubelet and containerd (not of
// its pods or shims); 0 while it is stopped.
func (c *Cluster) NodeRSS(name string) (int64, error) {
	n, err := c.node(name)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, comp := range []*component{n.kubelet, n.containerd} {
		if comp == nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", comp.cmd.Process.Pid))
		if err != nil {
			return 0, fmt.Errorf("memory of %s: %w", comp.name, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			var kib int64
			if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kib); err == nil {
				total += kib << 10
			}
		}
	}
	return total, nil
}
