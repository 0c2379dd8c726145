package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// freePort returns a TCP port free on 127.0.0.1 now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startControlPlane starts etcd, kube-apiserver (waiting for /readyz),
// kube-controller-manager, kube-scheduler and CoreDNS.
func (c *Cluster) startControlPlane(ctx context.Context, b binaries, _ Config) error {
	client, err := freePort()
	if err != nil {
		return err
	}
	peer, err := freePort()
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(client)
	if _, err := c.start("etcd", b.etcd, "--data-dir", c.path("etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peer),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peer),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(peer), "--unsafe-no-fsync"); err != nil {
		return err
	}
	p := c.pki.path
	if _, err := c.start("kube-apiserver", b.apiserver,
		"--etcd-servers", etcdURL,
		"--bind-address", apiServerIP, "--advertise-address", apiServerIP, "--secure-port", "443",
		"--tls-cert-file", p("apiserver.crt"), "--tls-private-key-file", p("apiserver.key"),
		"--client-ca-file", p("ca.crt"),
		"--service-account-key-file", p("sa.pub"), "--service-account-signing-key-file", p("sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", serviceCIDR,
		"--authorization-mode", "Node,RBAC", "--allow-privileged=true",
		"--kubelet-client-certificate", p("kubelet-client.crt"), "--kubelet-client-key", p("kubelet-client.key"),
		"--kubelet-preferred-address-types", "InternalIP",
		// Webhooks through their Services' endpoints: there is no kube-proxy for ClusterIPs.
		"--enable-aggregator-routing=true"); err != nil {
		return err
	}
	if err := c.admin(); err != nil {
		return err
	}
	if err := c.waitFor("kube-apiserver /readyz", 90*time.Second, func() (bool, error) {
		err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		return err == nil, err
	}); err != nil {
		return err
	}
	if _, err := c.start("kube-controller-manager", b.controllerManager,
		"--kubeconfig", c.kubeconfig, "--service-account-private-key-file", p("sa.key"),
		"--root-ca-file", p("ca.crt"), "--use-service-account-credentials", "--controllers=*",
		"--leader-elect=false", "--secure-port=0"); err != nil {
		return err
	}
	if _, err := c.start("kube-scheduler", b.scheduler, "--kubeconfig", c.kubeconfig, "--leader-elect=false", "--secure-port=0"); err != nil {
		return err
	}
	return c.startCoreDNS(b)
}

// startCoreDNS serves cluster.local on the node's address, port 53. No cache: an early
// NXDOMAIN (before a pod has its address) would be kept for seconds.
func (c *Cluster) startCoreDNS(b binaries) error {
	corefile := fmt.Sprintf(`.:53 {
  bind %s
  errors
  kubernetes cluster.local in-addr.arpa ip6.arpa {
    kubeconfig %s testcluster
    pods insecure
    ttl 5
    fallthrough in-addr.arpa ip6.arpa
  }
}
`, nodeIP, c.kubeconfig)
	if err := os.WriteFile(c.path("Corefile"), []byte(corefile), 0o600); err != nil {
		return fmt.Errorf("Corefile: %w", err)
	}
	_, err := c.start("coredns", b.coredns, "-conf", c.path("Corefile"))
	return err
}

// startContainerd starts Debian's containerd with everything under root. restrict_oom_score_adj:
// these VMs lack CAP_SYS_RESOURCE, so runc could not set a negative oom_score_adj.
func (c *Cluster) startContainerd(ctx context.Context, b binaries, _ Config) error {
	sock := c.path("containerd", "containerd.sock")
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
`, c.path("containerd", "root"), c.path("containerd", "state"), sock, sock+".ttrpc", PauseImage, c.path("cni", "net.d"))
	if err := os.WriteFile(c.path("containerd", "config.toml"), []byte(config), 0o600); err != nil {
		return fmt.Errorf("containerd config: %w", err)
	}
	if err := os.WriteFile(c.path("cni", "net.d", "10-trainyard.conflist"), []byte(cniConfig(c.path("cni", "ipam"))), 0o600); err != nil {
		return fmt.Errorf("CNI config: %w", err)
	}
	if _, err := c.start("containerd", b.containerd, "--config", c.path("containerd", "config.toml")); err != nil {
		return err
	}
	return c.waitFor("containerd", 30*time.Second, func() (bool, error) {
		out, err := exec.CommandContext(ctx, b.ctr, "-a", sock, "version").CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("ctr version: %v: %s", err, out)
		}
		return true, nil
	})
}

// importImages imports the OCI archives into containerd's k8s.io namespace.
func (c *Cluster) importImages(ctx context.Context, b binaries, cfg Config) error {
	for _, img := range cfg.Images {
		out, err := exec.CommandContext(ctx, b.ctr, "-a", c.path("containerd", "containerd.sock"),
			"-n", "k8s.io", "images", "import", img).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import image %s: %v: %s", img, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// startNode starts kubelet and waits for the node to be Ready and for the default
// ServiceAccount (pods are refused until it exists).
func (c *Cluster) startNode(ctx context.Context, b binaries, _ Config) error {
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
`, c.path("containerd", "containerd.sock"), c.pki.path("ca.crt"), nodeIP, nodeIP, c.path("pod-logs"))
	if err := os.WriteFile(c.path("kubelet", "config.yaml"), []byte(config), 0o600); err != nil {
		return fmt.Errorf("kubelet config: %w", err)
	}
	if _, err := c.start("kubelet", b.kubelet, "--config", c.path("kubelet", "config.yaml"),
		"--kubeconfig", c.path("kubelet.kubeconfig"), "--hostname-override", NodeName,
		"--node-ip", nodeIP, "--root-dir", c.path("kubelet", "root"), "--cert-dir", c.path("kubelet", "pki")); err != nil {
		return err
	}
	if err := c.waitFor("node "+NodeName+" Ready", 2*time.Minute, func() (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeReady(n), nil
	}); err != nil {
		return err
	}
	return c.waitFor("the default ServiceAccount", time.Minute, func() (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
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

// advertiseGPUs patches the node's nvidia.com/gpu capacity (no device plugin here) and
// waits until kubelet copies it to allocatable.
func (c *Cluster) advertiseGPUs(ctx context.Context, _ binaries, cfg Config) error {
	if cfg.GPUs == 0 {
		return nil
	}
	patch := fmt.Sprintf(`[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"%d"}]`, cfg.GPUs)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, NodeName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("advertise %d GPUs on the node: %w", cfg.GPUs, err)
	}
	return c.waitFor("nvidia.com/gpu in the node's allocatable", time.Minute, func() (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := n.Status.Allocatable["nvidia.com/gpu"]
		return q.Value() == int64(cfg.GPUs), nil
	})
}
