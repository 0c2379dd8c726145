package envtest_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/internal/cli"
	"github.com/trainyard/trainyard/internal/testkube"
	"github.com/trainyard/trainyard/internal/workload"
)

// operatorRun is a `trainyard operator` running in the test.
type operatorRun struct {
	stderr syncBuffer
	exited chan int
	cancel context.CancelFunc
}

// freeAddr returns a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runOperator runs `trainyard operator` in process with the kubeconfig and args, with leader
// election in trainyard-system, and waits until it is ready and leads.
func runOperator(t *testing.T, env *testkube.Env, kubeconfig string, args ...string) *operatorRun {
	t.Helper()
	probeAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	o := &operatorRun{exited: make(chan int, 1), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		o.exited <- cli.Main(ctx, append([]string{"operator", "--kubeconfig", kubeconfig, "--image", "registry.local/trainyard:test",
			"--health-probe-bind-address", probeAddr, "--leader-elect", "--leader-election-namespace", "trainyard-system"}, args...),
			cli.IO{In: strings.NewReader(""), Out: &syncBuffer{}, Err: &o.stderr})
	}()
	ready := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !ready; time.Sleep(100 * time.Millisecond) {
		select {
		case code := <-o.exited:
			t.Fatalf("trainyard operator exited %d before it was ready:\n%s", code, o.stderr.String())
		default:
		}
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
	}
	if !ready {
		t.Fatalf("trainyard operator not ready on %s after 30s", probeAddr)
	}
	var lease coordinationv1.Lease
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: "trainyard-system", Name: "trainyard-operator.trainyard.dev"}, &lease)
		if err == nil && lease.Spec.HolderIdentity != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader Lease after 30s: %v", err)
		}
	}
	return o
}

// stop stops the operator (SIGTERM) and checks that it exits 0 and was refused nothing.
func (o *operatorRun) stop(t *testing.T) {
	t.Helper()
	if log := o.stderr.String(); strings.Contains(log, "forbidden") {
		t.Errorf("the operator was refused something with the installed roles:\n%s", log)
	}
	o.cancel()
	select {
	case code := <-o.exited:
		if code != 0 {
			t.Errorf("trainyard operator stopped with exit %d:\n%s", code, o.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("trainyard operator did not stop within 30s of its context's end")
	}
	t.Logf("the operator's log:\n%s", o.stderr.String())
}

// waitForPods waits for the worker pods the operator makes for a TrainJob.
func waitForPods(t *testing.T, env *testkube.Env, o *operatorRun, ns, name string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var pods corev1.PodList
		if err := env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{workload.LabelJob: name}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator made no pod for TrainJob %s/%s in 30s; its log:\n%s", ns, name, o.stderr.String())
		}
	}
}

// `trainyard operator` as the Deployment runs it, against a real API server, with only
// the permissions `trainyard install` gives its ServiceAccount: it becomes ready, takes
// the leader Lease, runs a TrainJob's first attempt (its pods, and its
// NetworkPolicy) without being refused anything, and stops cleanly on its context's end
// (SIGTERM). Its metrics are served over HTTPS to those the API server authenticates and
// allows: none without a token (401), none for a ServiceAccount without the right (403),
// and to one bound to the metrics reader's ClusterRole.
func TestOperatorCommand(t *testing.T) {
	env := testkube.Start(t, testkube.Options{NoCRD: true})
	if code, _, _ := installCLI(t, "install", "--kubeconfig", env.Kubeconfig); code != 0 {
		t.Fatalf("install: exit %d", code)
	}
	asOperator := impersonating(t, env.Kubeconfig, "system:serviceaccount:trainyard-system:trainyard-operator")
	metricsAddr := freeAddr(t)
	o := runOperator(t, env, asOperator, "--metrics-bind-address", metricsAddr)

	if err := env.Client.Create(context.Background(), validJob("default", "rbac")); err != nil {
		t.Fatal(err)
	}
	waitForPods(t, env, o, "default", "rbac")
	checkMetricsAuth(t, env, "https://"+metricsAddr+"/metrics")
	o.stop(t)
}

// checkMetricsAuth checks who may read the metrics at url.
func checkMetricsAuth(t *testing.T, env *testkube.Env, url string) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("a token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	stranger, prometheus := token("stranger"), token("prometheus")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-trainyard"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "trainyard-operator-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: "default"}}}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(bearer string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("metrics without a token: %d, want 401", code)
	}
	if code, _ := get(stranger); code != http.StatusForbidden {
		t.Errorf("metrics for a ServiceAccount without the right: %d, want 403", code)
	}
	// The operator caches the API server's answers for a minute; the binding came first.
	if code, body := get(prometheus); code != http.StatusOK || !strings.Contains(body, "# HELP") {
		t.Errorf("metrics for Prometheus's ServiceAccount: %d %.200s, want 200 and metrics", code, body)
	}
	// A TLS server answers plain HTTP with a 400, never the metrics.
	if resp, err := http.Get("http://" + strings.TrimPrefix(url, "https://")); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the metrics are served over plain HTTP")
		}
	}
}

// `trainyard install --watch-namespace team-a` grants the operator what it needs there
// only: `trainyard operator --namespace team-a`, with those rights, runs a TrainJob of
// team-a without being refused anything, and may not create Jobs or read Secrets in
// another namespace. Its --worker-cpu-per-gpu and --worker-memory-per-gpu are what the
// workers of a job that names no CPU or memory request per GPU; a job's own win.
func TestOperatorCommandOneNamespace(t *testing.T) {
	env := testkube.Start(t, testkube.Options{NoCRD: true})
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := installCLI(t, "install", "--kubeconfig", env.Kubeconfig, "--watch-namespace", "team-a"); code != 0 {
		t.Fatalf("install: exit %d", code)
	}
	asOperator := impersonating(t, env.Kubeconfig, "system:serviceaccount:trainyard-system:trainyard-operator")
	o := runOperator(t, env, asOperator, "--namespace", "team-a", "--metrics-bind-address", "0",
		"--worker-cpu-per-gpu", "100m", "--worker-memory-per-gpu", "64Mi")
	if err := env.Client.Create(ctx, validJob("team-a", "rbac")); err != nil {
		t.Fatal(err)
	}
	defaulted := validJob("team-a", "defaulted")
	defaulted.Spec.Resources.CPU, defaulted.Spec.Resources.Memory = nil, nil
	if err := env.Client.Create(ctx, defaulted); err != nil {
		t.Fatal(err)
	}
	// validJob's workers have 4 GPUs each.
	for name, want := range map[string]struct{ cpu, memory, memoryLimit string }{
		"rbac":      {"500m", "8Gi", "8Gi"},
		"defaulted": {"400m", "256Mi", "0"},
	} {
		waitForPods(t, env, o, "team-a", name)
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace("team-a"), client.MatchingLabels{workload.LabelJob: name}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			r := p.Spec.Containers[0].Resources
			if r.Requests.Cpu().String() != want.cpu || r.Requests.Memory().String() != want.memory ||
				r.Limits.Memory().String() != want.memoryLimit || !r.Limits.Cpu().IsZero() {
				t.Errorf("pod %s: resources %+v; want requests of cpu %s and memory %s, memory limit %s, no CPU limit",
					p.Name, r, want.cpu, want.memory, want.memoryLimit)
			}
		}
	}

	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, attr := range []struct{ ns, verb, group, resource string }{
		{"default", "create", "batch", "jobs"}, {"default", "get", "", "secrets"}, {"default", "delete", "", "pods"},
		{"kube-system", "get", "", "secrets"}, {"", "list", "", "secrets"}, {"", "list", "", "pods"},
	} {
		review, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:trainyard-system:trainyard-operator",
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: attr.ns, Verb: attr.verb, Group: attr.group, Resource: attr.resource}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed {
			t.Errorf("the namespaced operator may %s %s in namespace %q", attr.verb, attr.resource, attr.ns)
		}
	}
	o.stop(t)
}

// syncBuffer is a buffer that goroutines can write while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
