package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
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
func (c *Cluster) startControlPlane(ctx context.Context, b binaries) error {
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
		"--enable-aggregator-routing=true",
		// Pods asking for nvidia.com/gpu tolerate GPU nodes' taint (GPUTaint).
		"--enable-admission-plugins=ExtendedResourceToleration"); err != nil {
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
		"--leader-elect=false", "--secure-port=0",
		// A lost node (StopNode) is NotReady 20 s after its last heartbeat, not 50 s.
		"--node-monitor-grace-period=20s", "--node-monitor-period=2s"); err != nil {
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
