package envtest_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/internal/cli"
	"github.com/trainyard/trainyard/internal/testkube"
)

// installCLI runs the command line in this process and returns its exit code, stdout
// and stderr.
func installCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), args, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	logged := out.String()
	if len(logged) > 2000 {
		logged = logged[:2000] + "...\n"
	}
	t.Logf("trainyard %s: exit %d\n%s%s", strings.Join(args, " "), code, logged, errOut.String())
	return code, out.String(), errOut.String()
}

// installClient is a client that knows the kinds install makes.
func installClient(t *testing.T, env *testkube.Env) client.Client {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// decodeYAML reads the objects of a YAML stream.
func decodeYAML(t *testing.T, data string) []*unstructured.Unstructured {
	t.Helper()
	r := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "---" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := k8syaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("decode %q: %v", doc, err)
		}
		objs = append(objs, obj)
	}
}

// lineStatuses maps each object of install's or uninstall's output to what happened to it.
func lineStatuses(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		ref, status, _ := strings.Cut(line, " ")
		if strings.Contains(ref, "/") {
			got[ref] = status
		}
	}
	return got
}

// The objects install makes, as its output names them.
var installRefs = []string{
	"namespace/trainyard-system",
	"customresourcedefinition.apiextensions.k8s.io/trainjobs.trainyard.dev",
	"clusterrole.rbac.authorization.k8s.io/trainyard-operator",
	"clusterrole.rbac.authorization.k8s.io/trainyard-operator-metrics-reader",
	"priorityclass.scheduling.k8s.io/trainyard-operator-room-probe",
	"serviceaccount/trainyard-operator",
	"clusterrolebinding.rbac.authorization.k8s.io/trainyard-operator",
	"deployment.apps/trainyard-operator",
}

// wantStatuses fails the test unless every object of want has that status in out (the
// CRD's may say more, e.g. "created, established").
func wantStatuses(t *testing.T, out string, want map[string]string) {
	t.Helper()
	got := lineStatuses(out)
	for ref, status := range want {
		if !strings.HasPrefix(got[ref], status) {
			t.Errorf("%s: %q, want %q", ref, got[ref], status)
		}
	}
}

// allStatus maps every installed object to status.
func allStatus(status string) map[string]string {
	m := map[string]string{}
	for _, ref := range installRefs {
		m[ref] = status
	}
	return m
}

// `trainyard install` on a real API server: its --dry-run output is valid there, the
// install is idempotent, and uninstall refuses to lose TrainJobs without --yes, keeps
// the CRD with --keep-crd and removes everything otherwise.
func TestInstall(t *testing.T) {
	env := testkube.Start(t, testkube.Options{NoCRD: true})
	c := installClient(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := env.Kubeconfig

	t.Run("DryRunIsValid", func(t *testing.T) {
		// Rendered for the default namespace, which exists, so that the API server can
		// dry-run every object. Server-side apply refuses fields the schemas lack.
		code, out, _ := installCLI(t, "install", "--dry-run", "--namespace", "default")
		if code != 0 {
			t.Fatalf("install --dry-run: exit %d", code)
		}
		objs := decodeYAML(t, out)
		if len(objs) != len(installRefs) {
			t.Fatalf("install --dry-run printed %d objects, want %d", len(objs), len(installRefs))
		}
		for _, obj := range objs {
			err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("test"),
				client.DryRunAll)
			if err != nil {
				t.Errorf("the API server refuses %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
		var crds apiextensionsv1.CustomResourceDefinitionList
		if err := c.List(ctx, &crds); err != nil || len(crds.Items) != 0 {
			t.Errorf("a dry run left CRDs: %d, %v", len(crds.Items), err)
		}
	})

	t.Run("Install", func(t *testing.T) {
		code, out, _ := installCLI(t, "install", "--kubeconfig", kc, "--image", "registry.local/trainyard:test")
		if code != 0 {
			t.Fatalf("install: exit %d", code)
		}
		wantStatuses(t, out, allStatus("created"))
		if got := lineStatuses(out)[installRefs[1]]; got != "created, established" {
			t.Errorf("CRD: %q, want created, established", got)
		}

		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: "trainjobs.trainyard.dev"}, &crd); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		}) {
			t.Errorf("the CRD is not established: %+v", crd.Status.Conditions)
		}
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: "trainyard-system", Name: "trainyard-operator"}, &d); err != nil {
			t.Fatal(err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.local/trainyard:test" {
			t.Errorf("deployment image %q", img)
		}
		if m := d.ManagedFields; len(m) == 0 || m[0].Manager != "trainyard" {
			t.Errorf("deployment's field managers %+v, want trainyard", m)
		}
		for _, obj := range []client.Object{&corev1.Namespace{}, &corev1.ServiceAccount{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}} {
			obj.SetName("trainyard-operator")
			if _, ok := obj.(*corev1.Namespace); ok {
				obj.SetName("trainyard-system")
			} else if _, ok := obj.(*corev1.ServiceAccount); ok {
				obj.SetNamespace("trainyard-system")
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Errorf("%T %s: %v", obj, obj.GetName(), err)
			}
		}
	})

	t.Run("InstallAgain", func(t *testing.T) {
		code, out, _ := installCLI(t, "install", "--kubeconfig", kc, "--image", "registry.local/trainyard:test")
		if code != 0 {
			t.Fatalf("install again: exit %d", code)
		}
		wantStatuses(t, out, allStatus("unchanged"))
		code, out, _ = installCLI(t, "install", "--kubeconfig", kc, "--image", "registry.local/trainyard:v2")
		if code != 0 {
			t.Fatalf("install a new image: exit %d", code)
		}
		want := allStatus("unchanged")
		want["deployment.apps/trainyard-operator"] = "configured"
		wantStatuses(t, out, want)
	})

	t.Run("OtherNamespace", func(t *testing.T) {
		code, _, errOut := installCLI(t, "install", "--kubeconfig", kc, "-n", "elsewhere")
		if code != 1 || !strings.Contains(errOut, `trainyard is installed in namespace "trainyard-system", not "elsewhere"`) {
			t.Errorf("install into a second namespace: exit %d, %s", code, errOut)
		}
	})

	t.Run("Forbidden", func(t *testing.T) {
		code, _, errOut := installCLI(t, "install", "--kubeconfig", impersonating(t, kc, "alice"))
		if code != 1 || !strings.Contains(errOut, `User "alice" cannot get resource "clusterrolebindings"`) ||
			!strings.Contains(errOut, "need cluster-admin") {
			t.Errorf("install without permission: exit %d, %s", code, errOut)
		}
	})

	job := validJob("default", "keep-me")
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("create a TrainJob: %v", err)
	}

	t.Run("UninstallRefuses", func(t *testing.T) {
		for _, args := range [][]string{{"uninstall"}, {"uninstall", "--dry-run"}} {
			code, out, errOut := installCLI(t, append(args, "--kubeconfig", kc)...)
			if code != 2 || out != "" || !strings.Contains(errOut,
				"uninstalling would delete 1 TrainJob(s) in namespace(s) default, stopping their training: pass --yes") {
				t.Errorf("%s with a TrainJob: exit %d, %s", args, code, errOut)
			}
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			t.Errorf("the TrainJob: %v", err)
		}
	})

	t.Run("UninstallDryRun", func(t *testing.T) {
		code, out, _ := installCLI(t, "uninstall", "--kubeconfig", kc, "--dry-run", "--yes")
		if code != 0 {
			t.Fatalf("uninstall --dry-run: exit %d", code)
		}
		wantStatuses(t, out, allStatus("would be deleted (dry run)"))
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: "trainyard-system", Name: "trainyard-operator"}, &d); err != nil {
			t.Errorf("after a dry run: %v", err)
		}
	})

	t.Run("UninstallKeepCRD", func(t *testing.T) {
		code, out, _ := installCLI(t, "uninstall", "--kubeconfig", kc, "--keep-crd")
		if code != 0 {
			t.Fatalf("uninstall --keep-crd: exit %d", code)
		}
		want := allStatus("deleted")
		want[installRefs[1]] = "kept (--keep-crd)"
		wantStatuses(t, out, want)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			t.Errorf("the TrainJob after uninstall --keep-crd: %v", err)
		}
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}} {
			obj.SetNamespace("trainyard-system")
			obj.SetName("trainyard-operator")
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				t.Errorf("%T after uninstall: %v", obj, err)
			}
		}
		for _, obj := range []client.Object{&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}} {
			obj.SetName("trainyard-operator")
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				t.Errorf("%T after uninstall: %v", obj, err)
			}
		}
		// Without kube-controller-manager the namespace stays Terminating.
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: "trainyard-system"}, &ns); err == nil && ns.DeletionTimestamp == nil {
			t.Errorf("the namespace is not being deleted")
		}
	})

	t.Run("UninstallYes", func(t *testing.T) {
		code, out, _ := installCLI(t, "uninstall", "--kubeconfig", kc, "--yes")
		if code != 0 {
			t.Fatalf("uninstall --yes: exit %d", code)
		}
		want := allStatus("not found")
		want[installRefs[1]] = "deleted"
		want[installRefs[0]] = "being deleted"
		wantStatuses(t, out, want)
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: "trainjobs.trainyard.dev"}, &crd); !apierrors.IsNotFound(err) {
			t.Errorf("CRD after uninstall: %v", err)
		}
	})

	t.Run("ExistingNamespace", func(t *testing.T) {
		code, out, _ := installCLI(t, "install", "--kubeconfig", kc, "-n", "default")
		if code != 0 {
			t.Fatalf("install into default: exit %d", code)
		}
		if got := lineStatuses(out)["namespace/default"]; got != "exists, left as it is (not created by trainyard)" {
			t.Errorf("namespace/default: %q", got)
		}
		code, out, _ = installCLI(t, "uninstall", "--kubeconfig", kc, "-n", "default")
		if code != 0 {
			t.Fatalf("uninstall from default: exit %d", code)
		}
		if got := lineStatuses(out)["namespace/default"]; got != "kept (not created by trainyard)" {
			t.Errorf("namespace/default: %q", got)
		}
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: "default"}, &ns); err != nil || ns.DeletionTimestamp != nil ||
			ns.Labels["app.kubernetes.io/managed-by"] != "" {
			t.Errorf("namespace default after install and uninstall: %v, %+v", err, ns.ObjectMeta)
		}
	})

	// --watch-namespace: Roles there and for the election; uninstall removes them even
	// when not told the namespace.
	t.Run("WatchNamespace", func(t *testing.T) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}); err != nil {
			t.Fatal(err)
		}
		code, _, _ := installCLI(t, "install", "--kubeconfig", kc, "-n", "default", "--watch-namespace", "team-b")
		if code != 0 {
			t.Fatalf("install --watch-namespace: exit %d", code)
		}
		roles := []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}}
		for i, obj := range roles {
			obj.SetNamespace([]string{"team-b", "team-b", "default", "default"}[i])
			obj.SetName([]string{"trainyard-operator", "trainyard-operator", "trainyard-operator-leader-election", "trainyard-operator-leader-election"}[i])
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Errorf("%T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
			}
		}
		code, out, _ := installCLI(t, "uninstall", "--kubeconfig", kc, "-n", "default", "--yes")
		if code != 0 || !strings.Contains(out, "role.rbac.authorization.k8s.io/trainyard-operator deleted") ||
			!strings.Contains(out, "rolebinding.rbac.authorization.k8s.io/trainyard-operator-leader-election deleted") {
			t.Fatalf("uninstall: exit %d\n%s", code, out)
		}
		for _, obj := range roles {
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s/%s after uninstall: %v", obj, obj.GetNamespace(), obj.GetName(), err)
			}
		}
	})
}

// impersonating writes a copy of a kubeconfig whose user acts as another user, with no
// permissions but those of every authenticated user.
func impersonating(t *testing.T, kubeconfig, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+user)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}
