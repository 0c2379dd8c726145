package operator_test

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// escapeTemplate is the pod template of the security issue: privileged, the host's
// network and PIDs, its root folder, and kube-proxy's service account.
const escapeTemplate = `{"spec": {"hostNetwork": true, "hostPID": true, "serviceAccountName": "kube-proxy",
	"containers": [{"name": "worker", "securityContext": {"privileged": true}, "volumeMounts": [{"name": "host", "mountPath": "/host"}]}],
	"volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}`

// refused waits until the job failed with reason and checks that its condition, its
// Event and its reason name each field, and that nothing of it was created.
func (k *cluster) refused(name, reason string, fields ...string) {
	k.t.Helper()
	got := k.waitStatus(name, "refused", func(st *v1.TrainJobStatus) bool {
		return st.Phase == v1.PhaseFailed && hasCond(st, v1.CondFailed, metav1.ConditionTrue, reason)
	})
	note := k.event(name, reason)
	for _, f := range fields {
		if c := cond(&got.Status, v1.CondFailed); !strings.Contains(c.Message, f) || !strings.Contains(note, f) || !strings.Contains(got.Status.Reason, f) {
			k.t.Errorf("%s: the condition %q, the Event %q or the reason %q does not name %s", name, c.Message, note, got.Status.Reason, f)
		}
	}
	var pods corev1.PodList
	var svcs corev1.ServiceList
	var nps networkingv1.NetworkPolicyList
	for _, l := range []client.ObjectList{&pods, &svcs, &nps} {
		if err := k.c.List(context.Background(), l, client.InNamespace(k.ns), client.MatchingLabels{workload.LabelJob: name}); err != nil {
			k.t.Fatal(err)
		}
	}
	if n := len(pods.Items) + len(svcs.Items) + len(nps.Items); n != 0 {
		k.t.Errorf("%s: %d pods, %d Services and %d NetworkPolicies were created for a refused job", name, len(pods.Items), len(svcs.Items), len(nps.Items))
	}
}

// The operator's pod policy refuses the pod template, a service account the
// namespace did not open to TrainJobs and git credentials that do not allow it, each
// with a condition and an Event naming the field and nothing created; a labelled service
// account and Secret are used. A pod template that panicked the merge fails the job
// naming its field, instead of failing every reconcile.
func testPodPolicy(k *cluster) {
	ctx := context.Background()
	k.newJob("escape", 2, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(escapeTemplate)}
	})
	k.refused("escape", v1.ReasonPodPolicy, "spec.kubernetes.podTemplate.spec.hostNetwork", "spec.kubernetes.podTemplate.spec.hostPID",
		"spec.kubernetes.podTemplate.spec.serviceAccountName", "spec.kubernetes.podTemplate.spec.containers[0].securityContext.privileged",
		"spec.kubernetes.podTemplate.spec.volumes[0].hostPath")

	k.newJob("panics", 1, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(`{"spec": {"containers": [{"name": []}]}}`)}
	})
	k.refused("panics", v1.ReasonInvalidPodTemplate, "spec.kubernetes.podTemplate", "spec.containers.name")

	k.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: k.ns}})
	k.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ci-token", Namespace: k.ns},
		StringData: map[string]string{"username": "ci", "password": "p"}})
	k.newJob("borrow", 1, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.ServiceAccountName = "deployer"
		j.Spec.Source = &v1.SourceSpec{Git: &v1.GitSource{URL: "https://evil.example.com/r.git", Revision: strings.Repeat("a", 40),
			CredentialsSecret: "ci-token"}}
	})
	k.refused("borrow", v1.ReasonPodPolicy, `spec.kubernetes.serviceAccountName: service account "deployer" is refused`,
		`spec.source.git.credentialsSecret: Secret "ci-token" is refused`)

	open := map[string]string{v1.LabelTrainJobAccess: "true"}
	k.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: k.ns, Labels: open}})
	k.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-git", Namespace: k.ns, Labels: open},
		StringData: map[string]string{"username": "team", "password": "p"}})
	k.newJob("allowed", 1, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.ServiceAccountName = "trainer"
		j.Spec.Source = &v1.SourceSpec{Git: &v1.GitSource{URL: "https://git.example.com/r.git", Revision: strings.Repeat("a", 40),
			CredentialsSecret: "team-git"}}
	})
	if pod := k.attempt("allowed", 1)[0].Spec; pod.ServiceAccountName != "trainer" {
		k.t.Errorf("service account %q", pod.ServiceAccountName)
	}

	// As `trainyard submit --kube` does it: the Secret first, the TrainJob, then the
	// TrainJob made its owner. Until then the job waits; a Secret that does not exist yet
	// is waited for too.
	made := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trainyard-git-x7k2p", Namespace: k.ns,
		Labels: map[string]string{workload.LabelManagedBy: workload.ManagedBy}}, StringData: map[string]string{"username": "me", "password": "p"}}
	k.create(made)
	tj := k.newJob("submitted", 1, func(j *v1.TrainJob) {
		j.Spec.Source = &v1.SourceSpec{Git: &v1.GitSource{URL: "https://git.example.com/r.git", Revision: strings.Repeat("a", 40),
			CredentialsSecret: made.Name}}
		j.Spec.Kubernetes.Volumes = []corev1.Volume{{Name: "later", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "later"}}}}
	})
	k.waitStatus("submitted", "waiting for its Secrets", func(st *v1.TrainJobStatus) bool {
		c := cond(st, v1.CondRunning)
		return st.Phase == v1.PhasePending && c != nil && c.Reason == v1.ReasonWaitingForSecret &&
			strings.Contains(c.Message, `Secret "later" does not exist`) && strings.Contains(c.Message, "not yet owned by the TrainJob")
	})
	made.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1.APIVersion, Kind: v1.Kind, Name: tj.Name, UID: tj.UID}}
	if err := k.c.Update(ctx, made); err != nil {
		k.t.Fatal(err)
	}
	k.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: k.ns, Labels: open}})
	k.attempt("submitted", 1)
}

// A job admitted benign cannot be edited to escape afterwards: the API server refuses a
// pod template made privileged, with the host's PIDs and root folder, and a volume made a
// hostPath, naming the field. A worker OOM-killed later is replaced as admitted.
func testFrozenPodSpec(k *cluster) {
	ctx := context.Background()
	k.newJob("benign", 2, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	})
	pods := k.runAll("benign", 1)
	for field, change := range map[string]func(*v1.KubernetesSpec){
		"spec.kubernetes.podTemplate": func(s *v1.KubernetesSpec) { s.PodTemplate = &runtime.RawExtension{Raw: []byte(escapeTemplate)} },
		"spec.kubernetes.volumes": func(s *v1.KubernetesSpec) {
			s.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		},
	} {
		j := k.get("benign")
		patch := client.MergeFrom(j.DeepCopy())
		change(j.Spec.Kubernetes)
		if err := k.c.Patch(ctx, j, patch); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field+": Invalid value") ||
			!strings.Contains(err.Error(), field+" is immutable") {
			k.t.Errorf("editing %s of a running job: %v; want it refused as Invalid, naming the field", field, err)
		}
	}
	k.setPod(pods[1], func(st *corev1.PodStatus) {
		exited(137, "")(st)
		st.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
	})
	k.eventually("worker 1's pod replaced", func() (bool, string) {
		var p corev1.Pod
		err := k.c.Get(ctx, client.ObjectKeyFromObject(pods[1]), &p)
		return err == nil && p.UID != pods[1].UID, fmt.Sprintf("%v (uid %s)", err, p.UID)
	})
	if p := k.attempt("benign", 1)[1]; p.Spec.HostPID || len(p.Spec.Volumes) != len(pods[1].Spec.Volumes) {
		k.t.Errorf("the replacement's host PID %v, volumes %+v; want worker 1's pod as admitted", p.Spec.HostPID, p.Spec.Volumes)
	}
}

// Before its first attempt's pods, a job gets a NetworkPolicy that it owns, selecting its
// pods by its UID (which its pods carry, whatever the pod template says), that admits the
// gang on every port and the progress port to the operator and the API server only.
func testNetworkPolicy(k *cluster) {
	tj := k.newJob("fenced", 2, func(j *v1.TrainJob) {
		j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(`{"metadata": {"labels": {"trainyard.dev/job-uid": "other"}}}`)}
	})
	pods := k.attempt("fenced", 1)
	var np networkingv1.NetworkPolicy
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: k.ns, Name: workload.NetworkPolicyName("fenced")}, &np); err != nil {
		k.t.Fatalf("the workers' NetworkPolicy: %v", err)
	}
	tj = k.get("fenced")
	if owner := metav1.GetControllerOf(&np); owner == nil || owner.UID != tj.UID {
		k.t.Errorf("the NetworkPolicy's controller %v, want the TrainJob", owner)
	}
	sel := np.Spec.PodSelector.MatchLabels
	if len(sel) != 1 || sel[workload.LabelJobUID] != string(tj.UID) || pods[0].Labels[workload.LabelJobUID] != string(tj.UID) {
		t := pods[0].Labels
		k.t.Errorf("NetworkPolicy selector %v, pod labels %v: the selector must match the pods by the TrainJob's UID", sel, t)
	}
	in := np.Spec.Ingress
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress || len(in) != 1 ||
		in[0].From[0].PodSelector.MatchLabels[workload.LabelJobUID] != string(tj.UID) || len(in[0].Ports) != 0 {
		k.t.Errorf("ingress %+v: with no operator pod and no API server address known, the gang's own pods only", in)
	}
	// A restart keeps it.
	pods = k.runAll("fenced", 1)
	k.setPod(pods[0], exited(1, ""))
	k.waitStatus("fenced", "failed", func(st *v1.TrainJobStatus) bool { return st.Phase == v1.PhaseFailed })
	if err := k.c.Get(context.Background(), client.ObjectKeyFromObject(&np), &networkingv1.NetworkPolicy{}); err != nil {
		k.t.Errorf("the NetworkPolicy after the job ended: %v", err)
	}
}

func (k *cluster) create(obj client.Object) {
	k.t.Helper()
	if err := k.c.Create(context.Background(), obj); err != nil {
		k.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}
