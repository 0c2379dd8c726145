// Package testkube starts a real kube-apiserver and etcd (controller-runtime's envtest) with
// the TrainJob CRD installed, for tests of everything that talks to Kubernetes.
//
// The binaries come from KUBEBUILDER_ASSETS (`make test` builds them with `make
// envtest-assets` and sets it), else from ./bin/k8s-<version> after `make envtest-assets`;
// without either the tests are skipped.
package testkube

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trainyard/trainyard/api/v1alpha1"
)

// KubeVersion names the folder `make envtest-assets` fills: ./bin/k8s-<KubeVersion>.
const KubeVersion = "1.37.1"

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme
	// Kubeconfig is a kubeconfig file for the control plane's admin user.
	Kubeconfig string
}

// RepoRoot is the repository's root, found from this file's path.
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the test file's path")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// AssetsDir returns the folder holding kube-apiserver and etcd, or skips the test.
// KUBEBUILDER_ASSETS wins (envtest reads it itself); a folder it names without the
// binaries is an error, not a skip, since `make test` sets it.
func AssetsDir(t testing.TB) string {
	t.Helper()
	dirs := []string{filepath.Join(RepoRoot(t), "bin", "k8s-"+KubeVersion), "/usr/local/kubebuilder/bin"}
	if env := os.Getenv("KUBEBUILDER_ASSETS"); env != "" {
		if !haveBinaries(env) {
			t.Fatalf("KUBEBUILDER_ASSETS=%s lacks kube-apiserver or etcd (run make envtest-assets)", env)
		}
		return env
	}
	for _, dir := range dirs {
		if haveBinaries(dir) {
			return dir
		}
	}
	t.Skipf("no kube-apiserver and etcd: KUBEBUILDER_ASSETS is unset and none are in %s; "+
		"run `make envtest-assets` (or `make test`, which sets KUBEBUILDER_ASSETS)", strings.Join(dirs, " or "))
	return ""
}

func haveBinaries(dir string) bool {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// NewScheme returns a scheme that knows TrainJobs and the built-in kinds the operator and
// the CLI use.
func NewScheme() *k8sruntime.Scheme {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{
		v1alpha1.AddToScheme, apiextensionsv1.AddToScheme, corev1.AddToScheme, batchv1.AddToScheme,
		coordinationv1.AddToScheme, eventsv1.AddToScheme, appsv1.AddToScheme, networkingv1.AddToScheme, rbacv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return scheme
}

// Options tune Start.
type Options struct {
	// NoCRD starts the control plane without the TrainJob CRD (to install it another way).
	NoCRD bool
	// CRDs are more CRD files or folders to install, relative to the repository root.
	CRDs []string
}

// Start starts etcd and kube-apiserver, with the TrainJob CRD installed unless opts.NoCRD,
// and stops them when the test ends.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	env := &envtest.Environment{BinaryAssetsDirectory: AssetsDir(t)}
	if !opts.NoCRD {
		env.CRDDirectoryPaths = []string{filepath.Join(RepoRoot(t), "config", "crd", "bases")}
		env.ErrorIfCRDPathMissing = true
	}
	for _, p := range opts.CRDs {
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, filepath.Join(RepoRoot(t), p))
		env.ErrorIfCRDPathMissing = true
	}
	// On a host with only loopback networking (no default route) the API server exits with
	// "no default routes found" unless told its address; advertising 127.0.0.1 in turn needs
	// the endpoint reconciler off. Both cost nothing elsewhere.
	env.ControlPlane.GetAPIServer().Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")

	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Logf("control plane started in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	scheme := NewScheme()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, Kubeconfig: writeKubeconfig(t, env)}
}

// writeKubeconfig writes a kubeconfig for the control plane's admin user.
func writeKubeconfig(t testing.TB, env *envtest.Environment) string {
	t.Helper()
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("add a control plane user: %v", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("make a kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
