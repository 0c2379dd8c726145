package workload

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// Network is who besides a gang's own pods may reach them: the operator (for worker 0's
// progress) and the API server's proxy (for `top job --kube`, the dashboard and
// TensorBoard behind `kubectl proxy`). The zero value admits neither.
type Network struct {
	// OperatorNamespace is the namespace of the operator's pods, which are labelled
	// OperatorPodLabels; empty when the operator does not run in a pod of the cluster.
	OperatorNamespace string
	// APIServerCIDRs are the addresses the API server connects to pods from.
	APIServerCIDRs []string
}

// OperatorPodLabels are the labels of the operator's pods, as `trainyard install` and the
// Helm chart make them.
func OperatorPodLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "trainyard", "app.kubernetes.io/component": "operator"}
}

// NetworkPolicyName is the name of the NetworkPolicy of a job's workers.
func NetworkPolicyName(job string) string { return job + "-workers" }

// namespaceNameLabel is the label the API server puts on every namespace: its name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// RenderNetworkPolicy returns the NetworkPolicy of job's workers, owned by job: its
// pods (every attempt's) take connections from each other on any port (NCCL and gloo
// connect to ports of their own choosing beside the rendezvous), and on the progress
// port from the operator and the API server; from nothing else. Only a network plugin
// that enforces NetworkPolicies (Calico, Cilium, ...) makes it hold.
func RenderNetworkPolicy(job *v1.TrainJob, net Network) *networkingv1.NetworkPolicy {
	gang := &metav1.LabelSelector{MatchLabels: map[string]string{LabelJobUID: string(job.UID)}}
	var watchers []networkingv1.NetworkPolicyPeer
	if net.OperatorNamespace != "" {
		watchers = append(watchers, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{namespaceNameLabel: net.OperatorNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: OperatorPodLabels()},
		})
	}
	watchers = append(watchers, apiServerPeers(net)...)
	ingress := []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: gang.DeepCopy()}}}}
	if len(watchers) > 0 {
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{From: watchers, Ports: tcpPort(ProgressPort)})
	}
	labels := map[string]string{LabelJob: job.Name, LabelJobUID: string(job.UID), LabelManagedBy: ManagedBy}
	return networkPolicy(job, NetworkPolicyName(job.Name), labels, gang, ingress)
}

// RenderTensorBoardNetworkPolicy returns the NetworkPolicy of job's TensorBoard, owned by
// job: only the API server (`kubectl proxy`) reaches its port. `kubectl port-forward`
// reaches it whatever the policy: it does not come over the pod network.
func RenderTensorBoardNetworkPolicy(job *v1.TrainJob, net Network) *networkingv1.NetworkPolicy {
	var ingress []networkingv1.NetworkPolicyIngressRule // none: nothing is admitted
	if peers := apiServerPeers(net); len(peers) > 0 {
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{From: peers, Ports: tcpPort(TensorBoardPort)})
	}
	labels := map[string]string{LabelTensorBoard: job.Name, LabelManagedBy: ManagedBy}
	pods := &metav1.LabelSelector{MatchLabels: map[string]string{LabelTensorBoard: job.Name}}
	return networkPolicy(job, TensorBoardName(job.Name), labels, pods, ingress)
}

func networkPolicy(job *v1.TrainJob, name string, labels map[string]string, pods *metav1.LabelSelector,
	ingress []networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace, Labels: maps.Clone(labels),
			OwnerReferences: []metav1.OwnerReference{ownerRef(job)}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *pods,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}

func apiServerPeers(net Network) []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for _, cidr := range net.APIServerCIDRs {
		out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
	}
	return out
}

func tcpPort(port int32) []networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(port)
	return []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolTCP), Port: &p}}
}
