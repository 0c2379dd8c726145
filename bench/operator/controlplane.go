package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trainyard/trainyard/internal/operator"
)

// controlPlane is a running kube-apiserver and etcd, with a client for the benchmark that
// no client-side rate limit holds back.
type controlPlane struct {
	env        *envtest.Environment
	config     *rest.Config
	client     client.Client
	scheme     *runtime.Scheme
	kubeconfig string        // the admin user's kubeconfig, for the operator
	started    time.Duration // how long the start took
	apiserver  int           // pid of kube-apiserver
	etcd       int           // pid of etcd
	http       *http.Client  // for the API server's /metrics
}

// startControlPlane starts etcd and kube-apiserver with the TrainJob CRD, as
// internal/testkube does for the tests, and writes an admin kubeconfig under cfg.root.
func startControlPlane(cfg *config) (*controlPlane, error) {
	env := &envtest.Environment{BinaryAssetsDirectory: cfg.assets, CRDDirectoryPaths: []string{cfg.crds},
		ErrorIfCRDPathMissing: true}
	// On a host with only loopback networking (no default route) the API server exits with
	// "no default routes found" unless told its address; advertising 127.0.0.1 in turn needs
	// the endpoint reconciler off. Both cost nothing elsewhere.
	env.ControlPlane.GetAPIServer().Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	start := time.Now()
	restCfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start the control plane: %w", err)
	}
	cp := &controlPlane{env: env, started: time.Since(start), scheme: operator.Scheme()}
	if err := cp.setUp(cfg, restCfg); err != nil {
		_ = cp.stop()
		return nil, err
	}
	return cp, nil
}

// setUp makes the benchmark's client, the operator's kubeconfig and finds the
// processes.
func (cp *controlPlane) setUp(cfg *config, restCfg *rest.Config) error {
	cp.config = rest.CopyConfig(restCfg)
	cp.config.QPS, cp.config.Burst = -1, 0 // no client-side limit: the benchmark measures the server
	cp.config.UserAgent = "trainyard-bench"
	var err error
	if cp.client, err = client.New(cp.config, client.Options{Scheme: cp.scheme}); err != nil {
		return err
	}
	if cp.http, err = rest.HTTPClientFor(cp.config); err != nil {
		return err
	}
	user, err := cp.env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add a control plane user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("make a kubeconfig: %w", err)
	}
	cp.kubeconfig = filepath.Join(cfg.root, "kubeconfig")
	if err := os.WriteFile(cp.kubeconfig, data, 0o600); err != nil {
		return err
	}
	kids := childProcesses(os.Getpid())
	cp.apiserver, cp.etcd = kids["kube-apiserver"], kids["etcd"]
	if cp.apiserver == 0 || cp.etcd == 0 {
		return fmt.Errorf("cannot find kube-apiserver and etcd among this process's children (found %v)", kids)
	}
	return nil
}

// stop stops the API server and etcd.
func (cp *controlPlane) stop() error { return cp.env.Stop() }

// createNamespaces creates the namespaces.
func (cp *controlPlane) createNamespaces(ctx context.Context, names ...string) error {
	for _, ns := range names {
		if err := cp.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// requestKey is one row of the API server's request counts.
type requestKey struct {
	verb     string // LIST, WATCH, GET, POST, PUT, PATCH, DELETE, DELETECOLLECTION, ...
	resource string // e.g. "jobs", "pods/status", "trainjobs/status"
	conflict bool   // answered 409 Conflict
}

// requestCounts are apiserver_request_total, summed by verb, resource (with
// subresource) and whether the answer was a conflict.
type requestCounts map[requestKey]float64

// requests scrapes the API server's /metrics.
func (cp *controlPlane) requests(ctx context.Context) (requestCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cp.config.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := cp.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape the API server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape the API server's metrics: %s", resp.Status)
	}
	return parseRequestCounts(resp.Body)
}

// parseRequestCounts reads apiserver_request_total from Prometheus' text format.
func parseRequestCounts(r io.Reader) (requestCounts, error) {
	out := requestCounts{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const name = "apiserver_request_total{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		labelText, value, ok := strings.Cut(line[len(name):], "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		labels := parseLabels(labelText)
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[requestKey{verb: labels["verb"], resource: res, conflict: labels["code"] == "409"}] += v
	}
	return out, sc.Err()
}

// parseLabels splits `a="x",b="y"` into a map; values hold no quotes here.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		v, after, _ := strings.Cut(rest, `"`)
		out[k] = v
		s = strings.TrimPrefix(after, ",")
	}
	return out
}

// minus returns c − before, without the rows that did not change.
func (c requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// sorted returns the rows, the largest first.
func (c requestCounts) sorted() []requestKey {
	keys := make([]requestKey, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b requestKey) int {
		if c[a] != c[b] {
			if c[a] > c[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a.resource+a.verb, b.resource+b.verb)
	})
	return keys
}

// sum is the number of requests with this verb to this resource, conflicts included.
func (c requestCounts) sum(verb, resource string) float64 {
	return c[requestKey{verb, resource, false}] + c[requestKey{verb, resource, true}]
}
