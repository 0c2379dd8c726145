package podpolicy_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/podpolicy"
	"github.com/trainyard/trainyard/internal/workload"
)

func ptr[T any](v T) *T { return &v }

// job is a TrainJob with the pod template tmpl (none when empty), changed by change.
func job(tmpl string, change func(*v1.TrainJob)) *v1.TrainJob {
	j := &v1.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ml", UID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
		Spec: v1.TrainJobSpec{Workers: ptr(int32(2)), Command: []string{"python3", "train.py"},
			Kubernetes: &v1.KubernetesSpec{Image: "pytorch/pytorch:2.5.1"}},
	}
	if tmpl != "" {
		j.Spec.Kubernetes.PodTemplate = &runtime.RawExtension{Raw: []byte(tmpl)}
	}
	if change != nil {
		change(j)
	}
	return j
}

// check renders job's first attempt as the operator does and checks its worker pod.
func check(t *testing.T, j *v1.TrainJob, access *podpolicy.Access) podpolicy.Violations {
	t.Helper()
	a, err := workload.Render(j, 1, workload.Options{Image: "ghcr.io/trainyard/trainyard:test"})
	if err != nil {
		t.Fatal(err)
	}
	return podpolicy.CheckTrainJob(j, &a.Template.Spec, access)
}

func hostPath(j *v1.TrainJob) {
	j.Spec.Kubernetes.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
}

func gitSecret(j *v1.TrainJob) {
	j.Spec.Source = &v1.SourceSpec{Git: &v1.GitSource{URL: "https://git.example.com/team/code.git", Revision: strings.Repeat("a", 40),
		CredentialsSecret: "deploy-key"}}
}

func TestCheckTrainJob(t *testing.T) {
	someAccess := &podpolicy.Access{}
	cases := map[string]struct {
		tmpl   string
		change func(*v1.TrainJob)
		access *podpolicy.Access
		want   []string // the violations' fields
	}{
		"what Trainyard renders": {access: someAccess},
		// The pod template: each refusal names its field.
		"the pod template of the security issue": {tmpl: `{"spec": {"hostNetwork": true, "hostPID": true, "serviceAccountName": "kube-proxy",
			"containers": [{"name": "worker", "securityContext": {"privileged": true}, "volumeMounts": [{"name": "host", "mountPath": "/host"}]}],
			"volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}`, access: someAccess,
			want: []string{"spec.kubernetes.podTemplate.spec.hostNetwork", "spec.kubernetes.podTemplate.spec.hostPID",
				"spec.kubernetes.podTemplate.spec.serviceAccountName",
				"spec.kubernetes.podTemplate.spec.containers[0].securityContext.privileged",
				"spec.kubernetes.podTemplate.spec.volumes[0].hostPath"}},
		"hostIPC and a host port": {tmpl: `{"spec": {"hostIPC": true, "containers": [{"name": "sidecar", "image": "busybox"},
			{"name": "worker", "ports": [{"containerPort": 80, "hostPort": 80}]}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.hostIPC", "spec.kubernetes.podTemplate.spec.containers[1].ports[0].hostPort"}},
		"a hostPath in spec.kubernetes.volumes": {change: hostPath, want: []string{"spec.kubernetes.volumes[1].hostPath"}},
		"capabilities beyond the runtime's defaults": {tmpl: `{"spec": {"initContainers": [{"name": "trainyard-init",
			"securityContext": {"capabilities": {"add": ["CHOWN", "CAP_SETUID", "SYS_ADMIN", "CAP_NET_ADMIN", "IPC_LOCK"]}}}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.initContainers[0].securityContext.capabilities.add[2]",
				"spec.kubernetes.podTemplate.spec.initContainers[0].securityContext.capabilities.add[3]",
				"spec.kubernetes.podTemplate.spec.initContainers[0].securityContext.capabilities.add[4]"}},
		"unconfined profiles and an unmasked /proc": {tmpl: `{"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}},
			"containers": [{"name": "worker", "securityContext": {"appArmorProfile": {"type": "Unconfined"}, "procMount": "Unmasked"}}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.securityContext.seccompProfile.type",
				"spec.kubernetes.podTemplate.spec.containers[0].securityContext.procMount",
				"spec.kubernetes.podTemplate.spec.containers[0].securityContext.appArmorProfile.type"}},
		// Root in the container is the image's choice: Pod Security Standards' restricted
		// level refuses it, Trainyard's does not (doc.go).
		"relaxed defaults stay within the policy": {tmpl: `{"spec": {"automountServiceAccountToken": true,
			"securityContext": {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": false, "fsGroup": 0},
			"tolerations": [{"operator": "Exists"}], "containers": [{"name": "worker",
			"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": []}, "runAsUser": 0}}]}}`, access: someAccess},
		"a service account the namespace did not open": {change: func(j *v1.TrainJob) { j.Spec.Kubernetes.ServiceAccountName = "trainer" },
			access: someAccess, want: []string{"spec.kubernetes.serviceAccountName"}},
		"a service account labelled for TrainJobs": {change: func(j *v1.TrainJob) { j.Spec.Kubernetes.ServiceAccountName = "trainer" },
			access: &podpolicy.Access{ServiceAccounts: []string{"trainer"}}},
		"the default service account by name": {tmpl: `{"spec": {"serviceAccountName": "default"}}`, access: someAccess},
		"the deprecated serviceAccount field": {tmpl: `{"spec": {"serviceAccount": "kube-proxy"}}`, access: someAccess,
			want: []string{"spec.kubernetes.podTemplate.spec.serviceAccount"}},
		"git credentials that may not be used": {change: gitSecret, access: someAccess,
			want: []string{"spec.source.git.credentialsSecret", "spec.source.git.credentialsSecret"}},
		"git credentials that may be used": {change: gitSecret, access: &podpolicy.Access{Secrets: []string{"deploy-key"}}},
		"Secrets in volumes and variables": {tmpl: `{"spec": {"containers": [{"name": "worker",
			"env": [{"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "key"}}},
				{"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
			"envFrom": [{"secretRef": {"name": "db"}}]}],
			"volumes": [{"name": "p", "projected": {"sources": [{"configMap": {"name": "c"}}, {"secret": {"name": "tls"}}]}}]}}`,
			change: func(j *v1.TrainJob) {
				j.Spec.Kubernetes.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}}
			},
			access: &podpolicy.Access{Secrets: []string{"wandb"}},
			want: []string{"spec.kubernetes.podTemplate.spec.containers[0].env[1].valueFrom.secretKeyRef.name",
				"spec.kubernetes.podTemplate.spec.containers[0].envFrom[0].secretRef.name",
				"spec.kubernetes.podTemplate.spec.volumes[0].projected.sources[1].secret.name", "spec.kubernetes.volumes[0].secret.secretName"}},
		"another job's gang Secret": {tmpl: `{"spec": {"containers": [{"name": "worker",
			"env": [{"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "other-gang", "key": "key"}}}]}]}}`,
			access: &podpolicy.Access{},
			want:   []string{"spec.kubernetes.podTemplate.spec.containers[0].env[0].valueFrom.secretKeyRef.name"}},
		"no cluster asked: service accounts and Secrets unchecked": {tmpl: `{"spec": {"serviceAccountName": "kube-proxy"}}`,
			change: gitSecret},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := check(t, job(tc.tmpl, tc.change), tc.access)
			if diff := cmp.Diff(tc.want, got.Fields()); diff != "" {
				t.Errorf("violations (-want +got):\n%s\n%v", diff, got)
			}
		})
	}
}

// The messages say what is refused and what to do instead.
func TestViolationMessages(t *testing.T) {
	got := check(t, job(`{"spec": {"hostNetwork": true, "containers": [{"name": "worker", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}}`,
		func(j *v1.TrainJob) { hostPath(j); gitSecret(j); j.Spec.Kubernetes.ServiceAccountName = "trainer" }), &podpolicy.Access{}).Error()
	for _, want := range []string{
		"spec.kubernetes.podTemplate.spec.hostNetwork: host namespaces are refused",
		"adding capability SYS_ADMIN is refused (only the container runtime's defaults may be added back: AUDIT_WRITE, CHOWN",
		"spec.kubernetes.volumes[1].hostPath: hostPath volumes are refused: mount a PersistentVolumeClaim",
		`spec.source.git.credentialsSecret: Secret "deploy-key" is refused: the pods read only Secrets labelled trainyard.dev/trainjob-access=true`,
		`spec.kubernetes.serviceAccountName: service account "trainer" is refused: workers run as the namespace's default service account, or one labelled trainyard.dev/trainjob-access=true`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the violations lack %q:\n%s", want, got)
		}
	}
}

// Check names a bare pod's own fields; Referenced lists what the caller must look up.
func TestCheckPod(t *testing.T) {
	pod := &corev1.PodSpec{
		SecurityContext:    &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		ServiceAccountName: "builder",
		Containers: []corev1.Container{{Name: "a"}, {Name: "b", SecurityContext: &corev1.SecurityContext{Privileged: ptr(true)},
			Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "z"}, Key: "k"}}}}}},
		Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "y"}}},
			{Name: "t", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "z"}}}},
	}
	got := podpolicy.Check(pod, &podpolicy.Access{Secrets: []string{"y"}})
	want := []string{"spec.serviceAccountName", "spec.containers[1].securityContext.privileged", "spec.containers[1].env[0].valueFrom.secretKeyRef.name",
		"spec.volumes[1].secret.secretName"}
	if diff := cmp.Diff(want, got.Fields()); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	refs := podpolicy.Referenced(pod)
	if diff := cmp.Diff(podpolicy.References{ServiceAccounts: []string{"builder"}, Secrets: []string{"y", "z"}}, refs); diff != "" {
		t.Errorf("references (-want +got):\n%s", diff)
	}
	if refs := podpolicy.Referenced(&corev1.PodSpec{ServiceAccountName: "default"}); len(refs.ServiceAccounts)+len(refs.Secrets) != 0 {
		t.Errorf("the default service account is referenced: %+v", refs)
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]podpolicy.Level{"restricted": podpolicy.Restricted, "off": podpolicy.Off} {
		if got, err := podpolicy.ParseLevel(in); got != want || err != nil {
			t.Errorf("ParseLevel(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := podpolicy.ParseLevel("baseline"); err == nil || !strings.Contains(err.Error(), "use restricted") {
		t.Errorf("ParseLevel(baseline) = %v", err)
	}
	if podpolicy.Default != podpolicy.Restricted {
		t.Errorf("the default level is %q", podpolicy.Default)
	}
}
