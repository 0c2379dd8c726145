package install

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Install applies the objects of Render(opts) with server-side apply (field manager
// FieldManager, taking over fields others changed), so that installing again updates an
// installation in place. It waits for the CRD to be established and prints one line per
// object: created, configured or unchanged. An existing namespace that trainyard did not
// create is used as it is.
func (t Target) Install(ctx context.Context, opts Options) error {
	objs, err := Render(opts)
	if err != nil {
		return err
	}
	opts = opts.withDefaults()
	if err := t.checkInstallation(ctx, opts.Namespace); err != nil {
		return err
	}
	for _, obj := range objs {
		result, err := t.apply(ctx, obj)
		if err != nil {
			return err
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			if err := t.waitEstablished(ctx, obj); err != nil {
				return err
			}
			result += ", established"
		}
		if _, err := fmt.Fprintf(t.Out, "%s %s\n", Ref(obj), result); err != nil {
			return err
		}
	}
	if opts.RayAPI.enabled() {
		result, err := t.ensureRayAPIToken(ctx, opts.RayAPI)
		if err != nil {
			return err
		}
		fmt.Fprintf(t.Out, "secret/%s-token (%s) %s\n", opts.RayAPI.Name, opts.RayAPI.Namespace, result)
	}
	return nil
}

// apply applies one object and says what happened to it.
func (t Target) apply(ctx context.Context, obj *unstructured.Unstructured) (string, error) {
	existing := newObject(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
	before := ""
	switch err := t.Client.Get(ctx, client.ObjectKeyFromObject(obj), existing); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", explain("get", obj, err)
	default:
		before = existing.GetResourceVersion()
		if obj.GetKind() == "Namespace" && existing.GetLabels()[LabelManagedBy] != ManagedBy {
			return "exists, left as it is (not created by trainyard)", nil
		}
	}
	applied := obj.DeepCopy()
	if err := t.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied),
		client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return "", explain("apply", obj, err)
	}
	switch after := applied.GetResourceVersion(); {
	case before == "":
		return "created", nil
	case after == before:
		return "unchanged", nil
	default:
		return "configured", nil
	}
}

// waitEstablished waits until the API server serves a CRD.
func (t Target) waitEstablished(ctx context.Context, crd *unstructured.Unstructured) error {
	got := newObject(crd.GroupVersionKind(), "", crd.GetName())
	var reason string
	err := poll(ctx, t.timeout(), func(ctx context.Context) (bool, error) {
		if err := t.Client.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
			return false, explain("get", crd, err)
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conditions {
			cond, _ := c.(map[string]any)
			switch {
			case cond["type"] == "Established" && cond["status"] == "True":
				return true, nil
			case cond["type"] == "NamesAccepted" && cond["status"] == "False":
				reason, _ = cond["message"].(string)
			}
		}
		return false, nil
	})
	if errors.Is(err, errTimeout) {
		err = fmt.Errorf("%s is not established after %v", Ref(crd), t.timeout())
		if reason != "" {
			err = fmt.Errorf("%w: %s", err, reason)
		}
	}
	return err
}
