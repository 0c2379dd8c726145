package podpolicy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Level is how much the policy refuses.
type Level string

// The levels of the policy.
const (
	// Restricted refuses what the package documentation lists.
	Restricted Level = "restricted"
	// Off refuses nothing: whoever may create a TrainJob may create any pod.
	Off Level = "off"
	// Default is the level of an operator that is not told otherwise.
	Default = Restricted
)

// ParseLevel reads a level as the --pod-policy flags take it.
func ParseLevel(s string) (Level, error) {
	switch l := Level(s); l {
	case Restricted, Off:
		return l, nil
	}
	return "", fmt.Errorf("%q: use %s (refuse privileged pods, host namespaces, hostPath and other node or network volumes, "+
		"added capabilities, other service accounts and Secrets) or %s", s, Restricted, Off)
}

// DefaultServiceAccount is the ServiceAccount every namespace has; workers may always
// run as it.
const DefaultServiceAccount = "default"

// Violation is one thing the policy refuses, named by the field that asks for it.
type Violation struct {
	// Field is the field's path, such as
	// spec.kubernetes.podTemplate.spec.containers[0].securityContext.privileged.
	Field string
	// Detail says what is refused and what to do instead.
	Detail string
}

func (v Violation) String() string { return v.Field + ": " + v.Detail }

// Violations are what the policy refuses of one pod; as an error, they are listed in
// one line.
type Violations []Violation

func (vs Violations) Error() string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// Fields lists the violations' fields.
func (vs Violations) Fields() []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Field)
	}
	return out
}

// Access is what the caller knows of the namespace's ServiceAccounts and Secrets: which
// ones the TrainJob may use (see v1alpha1.LabelTrainJobAccess). A nil *Access means that
// nobody asked the cluster (`submit --kube --dry-run=client`): then service accounts
// and Secrets are not checked.
type Access struct {
	// ServiceAccounts are those besides the default one that the workers may run as.
	ServiceAccounts []string
	// Secrets are those the pods may read.
	Secrets []string
}

// References are the ServiceAccount and the Secrets a pod uses, which the caller looks
// up to fill in Access.
type References struct {
	// ServiceAccounts are the pod's service accounts (serviceAccountName, and the
	// deprecated serviceAccount) that are not the default one.
	ServiceAccounts []string
	// Secrets are the Secrets the pod reads, sorted, each once: in its containers'
	// variables, in its volumes (their content, or a volume driver's credentials, for a
	// refused volume type too) and as imagePullSecrets.
	Secrets []string
}

// Referenced returns the pod's References.
func Referenced(pod *corev1.PodSpec) References {
	var r References
	for _, f := range findings(nil, pod) {
		if f.secret != "" && !slices.Contains(r.Secrets, f.secret) {
			r.Secrets = append(r.Secrets, f.secret)
		}
		if f.serviceAccount != "" && !slices.Contains(r.ServiceAccounts, f.serviceAccount) {
			r.ServiceAccounts = append(r.ServiceAccounts, f.serviceAccount)
		}
	}
	slices.Sort(r.Secrets)
	return r
}

// Check returns what the restricted policy refuses in pod, each named by the pod's own
// field (spec.containers[0].securityContext.privileged). It sees no annotations: CheckPod
// checks them too.
func Check(pod *corev1.PodSpec, access *Access) Violations {
	return CheckPod(nil, pod, access)
}

// CheckPod returns what the restricted policy refuses in a pod with this metadata (nil:
// none) and spec, each named by the pod's own field: metadata.annotations[KEY] or
// spec.containers[0].securityContext.privileged.
func CheckPod(meta *metav1.ObjectMeta, pod *corev1.PodSpec, access *Access) Violations {
	var annotations map[string]string
	if meta != nil {
		annotations = meta.Annotations
	}
	var out Violations
	for _, f := range findings(annotations, pod) {
		if f.allowed(access) {
			continue
		}
		out = append(out, Violation{Field: f.at.podPath(pod), Detail: f.detail})
	}
	return out
}
