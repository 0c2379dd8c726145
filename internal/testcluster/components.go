package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
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
	c.apiserverArgs = []string{"--etcd-servers", etcdURL,
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
		"--enable-admission-plugins=ExtendedResourceToleration"}
	if c.apiserver, err = c.start("kube-apiserver", b.apiserver, c.apiserverArgs...); err != nil {
		return err
	}
	if err := c.admin(); err != nil {
		return err
	}
	if err := c.apiserverReady(ctx); err != nil {
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
	c.schedulerArgs = []string{"--kubeconfig", c.kubeconfig, "--leader-elect=false", "--secure-port=0"}
	if c.scheduler, err = c.start("kube-scheduler", b.scheduler, c.schedulerArgs...); err != nil {
		return err
	}
	return c.startCoreDNS(b)
}

// apiserverReady waits for kube-apiserver's /readyz.
func (c *Cluster) apiserverReady(ctx context.Context) error {
	return c.waitFor("kube-apiserver /readyz", 90*time.Second, func() (bool, error) {
		err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		return err == nil, err
	})
}

// gangSchedulingFlags serve the scheduler's gang scheduling in Kubernetes 1.37: the
// Workload and PodGroup API (scheduling.k8s.io/v1beta1) and the GangScheduling plugin.
// The API server serves them only with both flags.
var gangSchedulingFlags = []string{"--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1beta1=true"}

// GangScheduling restarts kube-apiserver and kube-scheduler with the scheduler's gang
// scheduling served (on) or not (off, as the cluster starts), and waits until the API
// server is ready and its discovery says so. Pods and objects stay; clients reconnect.
func (c *Cluster) GangScheduling(ctx context.Context, on bool) error {
	apiArgs, schedArgs := c.apiserverArgs, c.schedulerArgs
	if on {
		apiArgs = append(slices.Clone(apiArgs), gangSchedulingFlags...)
		schedArgs = append(slices.Clone(schedArgs), gangSchedulingFlags[0])
	}
	c.stopComponent(c.scheduler, 10*time.Second)
	c.stopComponent(c.apiserver, 10*time.Second)
	var err error
	if c.apiserver, err = c.start("kube-apiserver", c.bins.apiserver, apiArgs...); err != nil {
		return err
	}
	if err := c.apiserverReady(ctx); err != nil {
		return err
	}
	if err := c.waitFor("scheduling.k8s.io/v1beta1 served: "+strconv.FormatBool(on), 60*time.Second, func() (bool, error) {
		_, err := c.Client.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1beta1")
		return (err == nil) == on, nil
	}); err != nil {
		return err
	}
	c.scheduler, err = c.start("kube-scheduler", c.bins.scheduler, schedArgs...)
	return err
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
