package install

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A namespace an uninstall is still deleting refuses new objects with a Forbidden error;
// the message says to wait, not that cluster-admin is missing.
func TestExplainTerminatingNamespace(t *testing.T) {
	obj := newObject(schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, "trainyard-system", Name)
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `serviceaccounts "trainyard-operator" is forbidden: unable to create new content in namespace trainyard-system because it is being terminated`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"}}},
	}}
	got := explain("apply", obj, terminating).Error()
	if !strings.Contains(got, "namespace trainyard-system is still being deleted") || strings.Contains(got, "cluster-admin") {
		t.Errorf("terminating namespace: %s", got)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, Name, nil)
	if got := explain("apply", obj, forbidden).Error(); !strings.Contains(got, "need cluster-admin") {
		t.Errorf("forbidden: %s", got)
	}
}
