// Package testcluster starts and stops a real Kubernetes cluster for tests: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, containerd with runc
// and CNI's bridge plugin, and CoreDNS, all on this machine, as root, with images
// imported from OCI archives (no registry). It starts with one node; AddNode adds more
// (each its own kubelet, containerd, bridge and pod CIDR), StopNode loses one. See docs/architecture.md ("The test cluster")
// and the Makefile's cluster-assets target for where the binaries come from.
//
// Only one cluster runs on a machine at a time: it owns the bridges cni0 to cni3, the
// addresses 10.244.<i>.1 (node i) and 10.96.0.1 (the API server, where pods' in-cluster clients
// look for it), port 443 and 53 on those, and kubelet's cgroups; while it runs, the
// machine's ARP table thresholds are raised (raiseNeighbourLimits).
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
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Versions of the binaries Start looks for in Config.Assets.
const (
	KubeVersion    = "v1.37.1"
	EtcdVersion    = "v3.7.3"
	CoreDNSVersion = "v1.15.0"
	// NodeName is the cluster's first node; nodes added later are NodeName-2, -3, ...
	NodeName = "trainyard-node"
	// PauseImage is the sandbox image containerd is told to use; Config.Images must hold it.
	PauseImage = "localhost/pause:1"
	// WorkerCPUPerGPU and WorkerMemoryPerGPU are what the tests' operator gives a worker per
	// GPU when its TrainJob names no CPU or memory (`trainyard install --worker-cpu-per-gpu
	// --worker-memory-per-gpu`): the node has 2 CPUs and a few GiB beside its stand-in GPUs,
	// where the built-in 2 CPUs and 8Gi per GPU would leave GPU workers unschedulable.
	WorkerCPUPerGPU    = "100m"
	WorkerMemoryPerGPU = "64Mi"
)

// Config says where the binaries are and what the cluster holds.
type Config struct {
	// Assets is the folder of the versioned binaries (./bin after `make cluster-assets`).
	Assets string
	// Root is the folder for the cluster's state and logs; emptied first.
	Root string
	// Images are OCI archives to import into containerd before the node is used.
	Images []string
	// GPUs is the node's nvidia.com/gpu capacity (advertised, no device behind it).
	GPUs int
}

// Cluster is a running cluster.
type Cluster struct {
	root       string
	bins       binaries
	images     []string
	nodes      []*node
	components []*component
	pki        *pki
	lock       *os.File
	kubeconfig string
	// apiserver and scheduler run with apiserverArgs and schedulerArgs (GangScheduling
	// restarts them with more).
	apiserver, scheduler         *component
	apiserverArgs, schedulerArgs []string
	// restoreNeighbour puts back the machine's ARP table thresholds (raiseNeighbourLimits).
	restoreNeighbour func()
	// Client is an admin client.
	Client kubernetes.Interface
	// Config is the admin client's configuration.
	Config *rest.Config
}

// Kubeconfig is the path of an admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Root is the cluster's folder; its logs are in Root()/logs.
func (c *Cluster) Root() string { return c.root }

// Start starts a cluster and waits until pods can run on its node. On error nothing of it
// is left running.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	lock, err := takeLock()
	if err != nil {
		return nil, err
	}
	c := &Cluster{root: cfg.Root, lock: lock}
	if err := c.run(ctx, cfg); err != nil {
		c.Stop()
		return nil, fmt.Errorf("test cluster (logs in %s): %w", filepath.Join(cfg.Root, "logs"), err)
	}
	return c, nil
}

// takeLock makes sure this is the machine's only cluster.
func takeLock() (*os.File, error) {
	f, err := os.OpenFile("/run/trainyard-testcluster.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("test cluster lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, errors.New("another test cluster runs on this machine (it holds /run/trainyard-testcluster.lock); only one can")
	}
	return f, nil
}

func (c *Cluster) run(ctx context.Context, cfg Config) error {
	if os.Geteuid() != 0 {
		return errors.New("a test cluster needs root (kubelet, containerd and the pods' network)")
	}
	bins, err := findBinaries(cfg.Assets)
	if err != nil {
		return err
	}
	cleanUp(c.root)
	if err := os.RemoveAll(c.root); err != nil {
		return fmt.Errorf("empty %s: %w", c.root, err)
	}
	for _, d := range []string{"logs", "pids", "etcd"} {
		if err := os.MkdirAll(filepath.Join(c.root, d), 0o700); err != nil {
			return fmt.Errorf("cluster folder: %w", err)
		}
	}
	c.bins, c.images = bins, cfg.Images
	if err := c.makePKI(); err != nil {
		return err
	}
	first := c.newNode(0, NodeConfig{GPUs: cfg.GPUs})
	c.nodes = []*node{first}
	if c.restoreNeighbour, err = raiseNeighbourLimits(neighbourDir); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	if err := setUpBridge(first); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	if err := c.startControlPlane(ctx, bins); err != nil {
		return err
	}
	if err := c.startNode(ctx, first); err != nil {
		return err
	}
	return c.waitFor("the default ServiceAccount", time.Minute, func() (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}

// binaries are the paths of the cluster's programs.
type binaries struct {
	etcd, apiserver, controllerManager, scheduler, kubelet, coredns string
	containerd, ctr, shim, runc                                     string
}

func findBinaries(assets string) (binaries, error) {
	b := binaries{
		etcd:              filepath.Join(assets, "etcd-"+EtcdVersion),
		apiserver:         filepath.Join(assets, "kube-apiserver-"+KubeVersion),
		controllerManager: filepath.Join(assets, "kube-controller-manager-"+KubeVersion),
		scheduler:         filepath.Join(assets, "kube-scheduler-"+KubeVersion),
		kubelet:           filepath.Join(assets, "kubelet-"+KubeVersion),
		coredns:           filepath.Join(assets, "coredns-"+CoreDNSVersion),
	}
	var missing []string
	for _, p := range []string{b.etcd, b.apiserver, b.controllerManager, b.scheduler, b.kubelet, b.coredns} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, name := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "runc"} {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name+" (Debian's containerd and runc packages)")
		}
		switch name {
		case "containerd":
			b.containerd = p
		case "ctr":
			b.ctr = p
		case "containerd-shim-runc-v2":
			b.shim = p
		case "runc":
			b.runc = p
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		missing = append(missing, "/usr/lib/cni/bridge (Debian's containernetworking-plugins)")
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("missing: %s; run `make cluster-assets`", strings.Join(missing, ", "))
	}
	return b, nil
}

func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.root}, parts...)...)
}

// makePKI writes the CA, the certificates and the kubeconfigs.
func (c *Cluster) makePKI() error {
	p, err := newPKI(c.path("pki"))
	if err != nil {
		return err
	}
	c.pki = p
	server := "https://" + apiServerIP + ":443"
	apiIPs := []net.IP{net.ParseIP(apiServerIP), net.ParseIP(nodeIP), net.ParseIP("127.0.0.1")}
	apiNames := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}
	certs := []struct {
		name, cn string
		orgs     []string
		ips      []net.IP
		dns      []string
	}{
		{"apiserver", "kube-apiserver", nil, apiIPs, apiNames},
		{"admin", "admin", []string{"system:masters"}, nil, nil},
		{"kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil},
		{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}, []net.IP{net.ParseIP(nodeIP)}, []string{NodeName}},
	}
	for _, ct := range certs {
		if err := p.issue(ct.name, ct.cn, ct.orgs, ct.ips, ct.dns); err != nil {
			return err
		}
	}
	if err := p.serviceAccountKey(); err != nil {
		return err
	}
	c.kubeconfig = c.path("admin.kubeconfig")
	if err := p.kubeconfig(c.kubeconfig, server, "admin"); err != nil {
		return err
	}
	return p.kubeconfig(c.path("kubelet.kubeconfig"), server, "kubelet")
}

// Stop stops every component, kills the pods and removes what the cluster made outside
// its root (the bridge, network namespaces, mounts, cgroups), and puts back the machine's
// ARP table thresholds. Its root stays, with the logs.
func (c *Cluster) Stop() {
	for i := len(c.nodes) - 1; i >= 0; i-- {
		c.stopNode(c.nodes[i], 10*time.Second)
	}
	for i := len(c.components) - 1; i >= 0; i-- {
		c.components[i].stop(10 * time.Second)
	}
	c.components, c.nodes = nil, nil
	cleanUp(c.root)
	if c.restoreNeighbour != nil {
		c.restoreNeighbour()
		c.restoreNeighbour = nil
	}
	if c.lock != nil {
		c.lock.Close()
		c.lock = nil
	}
}

// cleanUp removes what a cluster under root left behind, whether it stopped or was killed.
func cleanUp(root string) {
	killLeftovers(root)
	// The cgroup parents of nodes added after the first (trainyard-node-2, ...).
	added, _ := filepath.Glob("/sys/fs/cgroup/*/" + NodeName + "-*")
	parents := map[string]bool{}
	for _, a := range added {
		parents[filepath.Base(a)] = true
	}
	killPods("kubepods")
	for p := range parents {
		killPods(filepath.Join(p, "kubepods"))
		removeCgroupParent(p)
	}
	killShims(root)
	unmountUnder(root)
	tearDownNetwork()
	removeOutside(root)
}

// admin connects the admin client.
func (c *Cluster) admin() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	c.Config, c.Client = cfg, cs
	return nil
}
