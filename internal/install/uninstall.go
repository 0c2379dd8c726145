package install

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/api/v1alpha1"
)

// UninstallOptions say what Uninstall may delete besides the operator.
type UninstallOptions struct {
	// KeepCRD keeps the TrainJob CRD, and with it every TrainJob.
	KeepCRD bool
	// Yes deletes even when TrainJobs or PersistentVolumeClaims would be deleted with the
	// CRD or the namespace. Without it Uninstall refuses with a *ConfirmError.
	Yes bool
	// DryRun makes every check and asks the API server to dry-run each deletion (which
	// checks permissions too), but deletes nothing.
	DryRun bool
}

// ConfirmError says that uninstalling would delete users' data (TrainJobs, and with them
// their running training; PersistentVolumeClaims in the namespace) and was not confirmed.
// Nothing was deleted.
type ConfirmError struct {
	// Lost says what would be lost, e.g. "3 TrainJob(s) in namespace(s) a, b".
	Lost []string
	// CRD says whether the CRD would be deleted, so that --keep-crd is a way out.
	CRD bool
}

func (e *ConfirmError) Error() string {
	msg := "uninstalling would delete " + strings.Join(e.Lost, " and ") + ": pass --yes to delete them"
	if e.CRD {
		msg += ", or --keep-crd to keep the CRD and the TrainJobs"
	}
	return msg
}

// plan is what Uninstall deletes: every object of Render except the CRD when kept and
// the namespace when trainyard did not create it; others in the order they are deleted.
type plan struct {
	crdRef string                     // the CRD's Ref, deleted or not
	crd    *unstructured.Unstructured // nil: kept
	ns     *unstructured.Unstructured // nil: not trainyard's, or already being deleted
	nsNote string                     // why ns is nil
	others []*unstructured.Unstructured
}

// Uninstall deletes what Install made, printing one line per object: the CRD first
// (while the operator still runs, so it can let go of TrainJobs it holds with
// finalizers) and waits until it is gone, then the operator's Deployment, bindings,
// ServiceAccount and ClusterRole, and last the namespace, if trainyard created it.
// Objects that are gone already are reported as "not found". Before deleting anything it
// refuses, with a *ConfirmError, when TrainJobs would be deleted and u.Yes is not set.
func (t Target) Uninstall(ctx context.Context, opts Options, u UninstallOptions) error {
	objs, err := Render(opts)
	if err != nil {
		return err
	}
	opts = opts.withDefaults()
	if err := t.checkInstallation(ctx, opts.Namespace); err != nil {
		return err
	}
	roles, err := t.namespacedRoles(ctx, objs)
	if err != nil {
		return err
	}
	ray, err := t.rayAPIObjects(ctx, opts.RayAPI.Namespace)
	if err != nil {
		return err
	}
	roles = append(roles, ray...)
	p, err := t.plan(ctx, append(objs, roles...), u)
	if err != nil {
		return err
	}
	if !u.Yes {
		if err := t.checkLoss(ctx, p, opts.Namespace); err != nil {
			return err
		}
	}
	if p.crd == nil {
		if _, err := fmt.Fprintf(t.Out, "%s kept (--keep-crd)\n", p.crdRef); err != nil {
			return err
		}
	} else if err := t.deleteCRD(ctx, p.crd, u.DryRun); err != nil {
		return err
	}
	for _, obj := range p.others {
		if err := t.delete(ctx, obj, u.DryRun); err != nil {
			return err
		}
	}
	if p.ns == nil {
		_, err := fmt.Fprintf(t.Out, "namespace/%s %s\n", opts.Namespace, p.nsNote)
		return err
	}
	return t.delete(ctx, p.ns, u.DryRun)
}

// namespacedRoles finds the Roles and RoleBindings an install with --watch-namespace
// made (labelled as trainyard's, in any namespace) that objs lacks, so that uninstall
// removes them whatever --watch-namespace it is given.
func (t Target) namespacedRoles(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	have := map[string]bool{}
	for _, obj := range objs {
		have[obj.GetNamespace()+"/"+Ref(obj)] = true
	}
	var out []*unstructured.Unstructured
	for _, kind := range []string{"RoleBindingList", "RoleList"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: kind})
		if err := t.Client.List(ctx, list, client.MatchingLabels{LabelName: "trainyard", LabelManagedBy: ManagedBy}); err != nil {
			return nil, fmt.Errorf("list %ss: %w", strings.TrimSuffix(kind, "List"), err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if name := obj.GetName(); (name == Name || name == ElectionRoleName) && !have[obj.GetNamespace()+"/"+Ref(obj)] {
				out = append(out, obj)
			}
		}
	}
	return out, nil
}

// plan sorts the rendered objects into what Uninstall deletes.
func (t Target) plan(ctx context.Context, objs []*unstructured.Unstructured, u UninstallOptions) (plan, error) {
	var p plan
	for _, obj := range slices.Backward(objs) {
		switch obj.GetKind() {
		case "CustomResourceDefinition":
			p.crdRef = Ref(obj)
			if !u.KeepCRD {
				p.crd = obj
			}
		case "Namespace":
			ns := newObject(obj.GroupVersionKind(), "", obj.GetName())
			switch err := t.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns); {
			case apierrors.IsNotFound(err):
				p.ns = obj // reported as not found
			case err != nil:
				return plan{}, explain("get", obj, err)
			case ns.GetDeletionTimestamp() != nil:
				p.nsNote = "being deleted"
			case ns.GetLabels()[LabelManagedBy] == ManagedBy:
				p.ns = obj
			default:
				p.nsNote = "kept (not created by trainyard)"
			}
		default:
			p.others = append(p.others, obj)
		}
	}
	return p, nil
}

// checkLoss returns a *ConfirmError if the plan deletes TrainJobs, or
// PersistentVolumeClaims with the namespace.
func (t Target) checkLoss(ctx context.Context, p plan, ns string) error {
	var lost []string
	if p.crd != nil || p.ns != nil {
		jobsNS := ns
		if p.crd != nil {
			jobsNS = "" // every namespace
		}
		n, where, err := t.count(ctx, v1alpha1.GroupVersion.WithKind("TrainJobList"), jobsNS)
		if err != nil {
			return err
		}
		if n > 0 {
			lost = append(lost, fmt.Sprintf("%d TrainJob(s) in namespace(s) %s, stopping their training", n, where))
		}
	}
	if p.ns != nil {
		n, _, err := t.count(ctx, schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaimList"}, ns)
		if err != nil {
			return err
		}
		if n > 0 {
			lost = append(lost, fmt.Sprintf("%d PersistentVolumeClaim(s) in namespace %s", n, ns))
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return &ConfirmError{Lost: lost, CRD: p.crd != nil}
}

// count counts the objects of a list kind in ns (every namespace if empty), and names
// their namespaces. A kind the server does not know has none.
func (t Target) count(ctx context.Context, listGVK schema.GroupVersionKind, ns string) (int, string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(listGVK)
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := t.Client.List(ctx, list, opts...); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return 0, "", nil
		}
		kind := strings.TrimSuffix(listGVK.Kind, "List")
		if apierrors.IsForbidden(err) {
			return 0, "", fmt.Errorf("list %ss: %w (uninstalling trainyard needs cluster-admin)", kind, err)
		}
		return 0, "", fmt.Errorf("list %ss: %w", kind, err)
	}
	seen := map[string]bool{}
	for _, item := range list.Items {
		seen[item.GetNamespace()] = true
	}
	return len(list.Items), strings.Join(slices.Sorted(maps.Keys(seen)), ", "), nil
}

// deleteCRD deletes the CRD and waits until it, and every TrainJob with it, is gone.
func (t Target) deleteCRD(ctx context.Context, crd *unstructured.Unstructured, dryRun bool) error {
	gone, err := t.deleteObject(ctx, crd, dryRun)
	if err != nil || gone || dryRun {
		return err
	}
	got := newObject(crd.GroupVersionKind(), "", crd.GetName())
	err = poll(ctx, t.timeout(), func(ctx context.Context) (bool, error) {
		switch err := t.Client.Get(ctx, client.ObjectKeyFromObject(got), got); {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, explain("get", crd, err)
		}
		return false, nil
	})
	if errors.Is(err, errTimeout) {
		return fmt.Errorf("%s is still being deleted after %v: TrainJobs held by finalizers keep it "+
			"(is the operator running?); see kubectl get trainjobs -A", Ref(crd), t.timeout())
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(t.Out, "%s deleted\n", Ref(crd))
	return err
}

// delete deletes one object and says so, or that it was not there.
func (t Target) delete(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gone, err := t.deleteObject(ctx, obj, dryRun)
	if err != nil || gone || dryRun {
		return err
	}
	_, err = fmt.Fprintf(t.Out, "%s deleted\n", Ref(obj))
	return err
}

// deleteObject asks for an object's deletion; gone says it was not there, which it
// reports, as it reports a dry run's deletion.
func (t Target) deleteObject(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (gone bool, err error) {
	target := newObject(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
	opts := []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	err = t.Client.Delete(ctx, target, opts...)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		_, err := fmt.Fprintf(t.Out, "%s not found\n", Ref(obj))
		return true, err
	}
	if err != nil {
		return false, explain("delete", obj, err)
	}
	if dryRun {
		_, err := fmt.Fprintf(t.Out, "%s would be deleted (dry run)\n", Ref(obj))
		return false, err
	}
	return false, nil
}
