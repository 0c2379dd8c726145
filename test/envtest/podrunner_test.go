package envtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/internal/workload"
)

// podRunner plays the scheduler and the kubelet for the operator's pods in one namespace,
// on this machine: it binds each pod the operator makes, runs its worker container as a
// local process (the trainyard binary for the one the init
// container would copy, with the pod's environment), reports them Running, and when a
// process exits sets the pod's phase, exit code and termination message as a kubelet
// would. The pods are bound to a Node of their own whose kubelet port answers nothing, so
// the API server cannot proxy their logs. A pod the operator deletes gets its process
// stopped with SIGTERM, and its deletion is completed once the process is gone, as a
// kubelet does. DNS is the one thing it fakes: MASTER_ADDR becomes 127.0.0.1 and each
// attempt gets free ports for the rendezvous and worker 0's gang coordinator; each pod
// gets a loopback address of its own as its IP, where worker 0 serves its progress.
type podRunner struct {
	t      *testing.T
	c      client.Client
	ns     string
	binary string
	dir    string // termination logs

	mu       sync.Mutex
	procs    map[string]*exec.Cmd // pod name → its worker process
	started  map[string]bool      // pods (by UID) whose process was started
	attempts map[string][2]int    // an attempt's rendezvous and gang ports, by TrainJob UID and attempt
	ips      int                  // loopback addresses given out
}

func startPodRunner(t *testing.T, c client.Client, ns, binary string) *podRunner {
	k := &podRunner{t: t, c: c, ns: ns, binary: binary, dir: t.TempDir(), procs: map[string]*exec.Cmd{},
		started: map[string]bool{}, attempts: map[string][2]int{}}
	k.makeNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := k.sync(ctx); err != nil && ctx.Err() == nil {
				t.Logf("pod runner: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, cmd := range k.procs {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return k
}

// nodeName is the Node the runner's pods are bound to.
const nodeName = "local-node"

// makeNode registers the runner's Node, with a kubelet port nothing listens on.
func (k *podRunner) makeNode(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := k.c.Create(context.Background(), node); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if err := k.c.Status().Update(context.Background(), node); err != nil {
		t.Fatal(err)
	}
}

func (k *podRunner) sync(ctx context.Context) error {
	var pods corev1.PodList
	if err := k.c.List(ctx, &pods, client.InNamespace(k.ns), client.MatchingLabels{workload.LabelManagedBy: workload.ManagedBy}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		k.mu.Lock()
		seen := k.started[string(p.UID)]
		k.started[string(p.UID)] = true
		k.mu.Unlock()
		if seen || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodPending && p.Status.Phase != "" {
			continue
		}
		if err := k.startPod(ctx, p); err != nil {
			return err
		}
	}
	return k.stopDeleted(ctx)
}

// ports are the rendezvous and gang ports of the pod's attempt, the same for every pod
// of it (a replaced one too).
func (k *podRunner) ports(p *corev1.Pod) ([2]int, error) {
	key := p.Labels[workload.LabelJobUID] + "/" + p.Labels[workload.LabelAttempt]
	k.mu.Lock()
	defer k.mu.Unlock()
	if ports, ok := k.attempts[key]; ok {
		return ports, nil
	}
	var ports [2]int
	for i := range ports {
		port, err := freePort()
		if err != nil {
			return ports, err
		}
		ports[i] = port
	}
	k.attempts[key] = ports
	return ports, nil
}

// ip gives a pod a loopback address of its own, as its IP.
func (k *podRunner) ip() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ips++
	return fmt.Sprintf("127.0.%d.%d", 10+k.ips/250, 1+k.ips%250)
}

// startPod binds the pod to the runner's node and runs its worker container as a process.
func (k *podRunner) startPod(ctx context.Context, p *corev1.Pod) error {
	c := p.Spec.Containers[0]
	if c.Command[0] != workload.BinPath {
		return fmt.Errorf("pod %s runs %q, not the binary the init container copies", p.Name, c.Command[0])
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		Target: corev1.ObjectReference{Kind: "Node", Name: nodeName}}
	if err := k.c.SubResource("binding").Create(ctx, p, binding); err != nil {
		return fmt.Errorf("bind pod %s: %w", p.Name, err)
	}
	ports, err := k.ports(p)
	if err != nil {
		return err
	}
	port, gang := ports[0], ports[1]
	index := workload.WorkerIndex(p.Labels)
	ip := k.ip()
	msgPath := filepath.Join(k.dir, p.Name+".msg")
	cmd := exec.Command(k.binary, c.Command[1:]...)
	cmd.Dir = c.WorkingDir
	// The pods share this machine's loopback: worker 0 serves its progress where the
	// operator reads it (its own address), the others (which serve only their GPUs) on any
	// free port.
	progress := "127.0.0.1:0"
	if index == 0 {
		progress = net.JoinHostPort(ip, strconv.Itoa(workload.ProgressPort))
	}
	cmd.Env = append(os.Environ(), "TRAINYARD_TERMINATION_LOG="+msgPath,
		workload.EnvProgressAddr+"="+progress, workload.EnvGangAddr+"=127.0.0.1:"+strconv.Itoa(gang))
	for _, e := range c.Env {
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			var sec corev1.Secret
			if err := k.c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.SecretKeyRef.Name}, &sec); err != nil {
				return fmt.Errorf("pod %s: %s from Secret %s: %w", p.Name, e.Name, ref.SecretKeyRef.Name, err)
			}
			e.Value = string(sec.Data[ref.SecretKeyRef.Key])
		}
		if ref := e.ValueFrom; ref != nil && ref.ResourceFieldRef != nil && ref.ResourceFieldRef.Resource == "requests.cpu" {
			// As the kubelet resolves it, in the divisor's units (the operator asks for 1m).
			e.Value = strconv.FormatInt(c.Resources.Requests.Cpu().MilliValue(), 10)
		}
		switch e.Name {
		case workload.EnvMasterAddr:
			e.Value = "127.0.0.1"
		case workload.EnvMasterPort:
			e.Value = strconv.Itoa(port)
		}
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	log, err := os.Create(filepath.Join(k.dir, p.Name+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start pod %s: %w", p.Name, err)
	}
	k.mu.Lock()
	k.procs[p.Name] = cmd
	k.mu.Unlock()
	k.setStatus(ctx, p, func(st *corev1.PodStatus) {
		st.Phase, st.PodIP = corev1.PodRunning, ip
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Ready: true, Image: c.Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	})
	go k.wait(p, cmd, log, msgPath)
	return nil
}

// wait reports the process's end as the pod's.
func (k *podRunner) wait(p *corev1.Pod, cmd *exec.Cmd, log *os.File, msgPath string) {
	err := cmd.Wait()
	log.Close()
	k.mu.Lock()
	delete(k.procs, p.Name)
	k.mu.Unlock()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	msg, _ := os.ReadFile(msgPath)
	k.setStatus(context.Background(), p, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodSucceeded
		if code != 0 {
			st.Phase = corev1.PodFailed
		}
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: workload.WorkerContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Message: string(msg), FinishedAt: metav1.Now()}}}}
	})
}

// kill kills the worker process of the pod whose name starts with prefix, as a node
// that dies would.
func (k *podRunner) kill(prefix string, sig syscall.Signal) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, cmd := range k.procs {
		if strings.HasPrefix(name, prefix) {
			_ = syscall.Kill(-cmd.Process.Pid, sig)
			return true
		}
	}
	return false
}

// killRank kills the process running the job's command (a rank) that the worker process
// of the pod whose name starts with prefix started, as the kernel's OOM killer or a
// crash would; the pod goes on. It returns the rank's pid, or 0. (/proc's order is not
// the children's: a waiting spare may come before the rank.)
func (k *podRunner) killRank(prefix string, sig syscall.Signal) int {
	k.mu.Lock()
	parent := 0
	for name, cmd := range k.procs {
		if strings.HasPrefix(name, prefix) {
			parent = cmd.Process.Pid
		}
	}
	k.mu.Unlock()
	if parent == 0 {
		return 0
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		data, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		_, after, _ := strings.Cut(string(data), ") ") // the command's name may hold spaces
		if f := strings.Fields(after); len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		// Not a spare Python waiting for the next attempt's rank (the launcher's other
		// children; a rank on a spare shows its own command line).
		if cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(stat), "cmdline")); strings.Contains(string(cmd), "trainyard: a spare Python") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(stat)))
		if syscall.Kill(pid, sig) == nil {
			return pid
		}
	}
	return 0
}

// stopDeleted stops the processes of pods being deleted, and completes the deletion of
// those whose process is gone.
func (k *podRunner) stopDeleted(ctx context.Context) error {
	var pods corev1.PodList
	if err := k.c.List(ctx, &pods, client.InNamespace(k.ns)); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil {
			continue
		}
		k.mu.Lock()
		_, running := k.procs[p.Name]
		k.mu.Unlock()
		if running {
			k.kill(p.Name, syscall.SIGTERM)
			continue
		}
		err := k.c.Delete(ctx, p, client.GracePeriodSeconds(0))
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func (k *podRunner) setStatus(ctx context.Context, p *corev1.Pod, change func(*corev1.PodStatus)) {
	for range 20 {
		var cur corev1.Pod
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(p), &cur); err != nil {
			return // deleted
		}
		change(&cur.Status)
		err := k.c.Status().Update(ctx, &cur)
		if err == nil || !apierrors.IsConflict(err) {
			return
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// progressPort is the port the pod's worker container declares for its progress.
func progressPort(p *corev1.Pod) int {
	for _, cp := range p.Spec.Containers[0].Ports {
		if cp.Name == "progress" {
			return int(cp.ContainerPort)
		}
	}
	return workload.ProgressPort
}
