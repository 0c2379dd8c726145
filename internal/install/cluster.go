package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultTimeout bounds the waits of Install and Uninstall when Target.Timeout is zero.
const DefaultTimeout = 2 * time.Minute

// connectTimeout bounds Connect's first request.
const connectTimeout = 15 * time.Second

// Target is a cluster to install on or uninstall from.
type Target struct {
	// Client talks to the cluster; install only uses unstructured objects, so any scheme
	// does.
	Client client.Client
	// Out gets one line per object.
	Out io.Writer
	// Timeout bounds the wait for the CRD to be established, or to be gone; zero means
	// DefaultTimeout.
	Timeout time.Duration
}

func (t Target) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return DefaultTimeout
}

// Connect checks that the cluster of cfg answers and returns a client for it. where names
// the cluster in errors (e.g. `context "kind-dev" (https://127.0.0.1:6443)`).
func Connect(ctx context.Context, cfg *rest.Config, where string) (client.Client, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("Kubernetes client for %s: %w", where, err)
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		switch {
		case apierrors.IsUnauthorized(err):
			return nil, fmt.Errorf("the Kubernetes API server of %s rejected the kubeconfig's credentials: %w", where, err)
		case apierrors.IsForbidden(err):
			// Some clusters hide /version; the requests that matter will say what is wrong.
		default:
			return nil, fmt.Errorf("cannot reach the Kubernetes API server of %s: %w", where, err)
		}
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("Kubernetes client for %s: %w", where, err)
	}
	return c, nil
}

// ConflictError says the cluster holds an installation that this one must not overwrite
// or remove: one in another namespace, or one made by Helm.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// checkInstallation refuses a cluster where the operator's ClusterRoleBinding belongs to
// Helm, or binds a ServiceAccount in another namespace than ns.
func (t Target) checkInstallation(ctx context.Context, ns string) error {
	crb := newObject(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, "", Name)
	if err := t.Client.Get(ctx, client.ObjectKeyFromObject(crb), crb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return explain("get", crb, err)
	}
	if by := crb.GetLabels()[LabelManagedBy]; by == "Helm" {
		release := crb.GetAnnotations()["meta.helm.sh/release-name"]
		releaseNS := crb.GetAnnotations()["meta.helm.sh/release-namespace"]
		return &ConflictError{Msg: fmt.Sprintf("trainyard was installed with Helm (release %q in namespace %q): "+
			"upgrade or uninstall it with helm", release, releaseNS)}
	}
	subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
	for _, s := range subjects {
		subject, _ := s.(map[string]any)
		if other, _ := subject["namespace"].(string); subject["kind"] == "ServiceAccount" && other != "" && other != ns {
			return &ConflictError{Msg: fmt.Sprintf("trainyard is installed in namespace %q, not %q: "+
				"pass --namespace %s, or uninstall it there first", other, ns, other)}
		}
	}
	return nil
}

// newObject returns an empty unstructured object of a kind, to get or delete by name.
func newObject(gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}

// explain wraps an error of a request about obj, saying what to do where it can.
func explain(verb string, obj *unstructured.Unstructured, err error) error {
	where := Ref(obj)
	if ns := obj.GetNamespace(); ns != "" {
		where += " in namespace " + ns
	}
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return fmt.Errorf("%s %s: namespace %s is still being deleted (by an uninstall a moment ago?): "+
			"wait until it is gone (kubectl get namespace %s) and install again: %w", verb, where, obj.GetNamespace(), obj.GetNamespace(), err)
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s %s: %w (installing and uninstalling trainyard need cluster-admin: they manage "+
			"a CustomResourceDefinition, a ClusterRole and a ClusterRoleBinding)", verb, where, err)
	}
	return fmt.Errorf("%s %s: %w", verb, where, err)
}

// poll calls done every 250 ms until it returns true or an error, or timeout passes.
func poll(parent context.Context, timeout time.Duration, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done(ctx)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				return err
			}
			return errTimeout
		case <-tick.C:
		}
	}
}

var errTimeout = errors.New("timed out")
