package podpolicy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/podpolicy"
)

// The tests below follow Pod Security Standards' baseline and restricted lists field by
// field: each case is a TrainJob, and the fields of the violations CheckTrainJob reports.

// policyCase is a job with the pod template tmpl (none when empty), changed by change,
// and the fields CheckTrainJob refuses in its worker pod given access.
type policyCase struct {
	tmpl   string
	change func(*v1.TrainJob)
	access *podpolicy.Access
	want   []string
}

func runCases(t *testing.T, cases map[string]policyCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := check(t, job(tc.tmpl, tc.change), tc.access)
			if diff := cmp.Diff(tc.want, got.Fields()); diff != "" {
				t.Errorf("violations (-want +got):\n%s\n%v", diff, got)
			}
		})
	}
}

func podAnnotations(kv ...string) func(*v1.TrainJob) {
	return func(j *v1.TrainJob) {
		j.Spec.Kubernetes.PodAnnotations = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			j.Spec.Kubernetes.PodAnnotations[kv[i]] = kv[i+1]
		}
	}
}

func TestHostProcess(t *testing.T) {
	runCases(t, map[string]policyCase{
		"the pod's": {tmpl: `{"spec": {"securityContext": {"windowsOptions": {"hostProcess": true}}}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.securityContext.windowsOptions.hostProcess"}},
		"a container's": {tmpl: `{"spec": {"containers": [{"name": "worker", "securityContext": {"windowsOptions": {"hostProcess": true}}}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.containers[0].securityContext.windowsOptions.hostProcess"}},
		"false": {tmpl: `{"spec": {"securityContext": {"windowsOptions": {"hostProcess": false}}}}`},
	})
}

func TestAppArmor(t *testing.T) {
	const key = "container.apparmor.security.beta.kubernetes.io/worker"
	runCases(t, map[string]policyCase{
		"unconfined in the pod template's annotations": {tmpl: `{"metadata": {"annotations": {"` + key + `": "unconfined"}}}`,
			want: []string{"spec.kubernetes.podTemplate.metadata.annotations[" + key + "]"}},
		"unconfined in spec.kubernetes.podAnnotations": {change: podAnnotations(key, "unconfined"),
			want: []string{"spec.kubernetes.podAnnotations[" + key + "]"}},
		"a profile that is not the node's": {change: podAnnotations(key, "other/profile"),
			want: []string{"spec.kubernetes.podAnnotations[" + key + "]"}},
		"the template's annotation over podAnnotations'": {tmpl: `{"metadata": {"annotations": {"` + key + `": "runtime/default"}}}`,
			change: podAnnotations(key, "unconfined")},
		"the runtime's default and the node's profiles": {change: podAnnotations(key, "runtime/default",
			"container.apparmor.security.beta.kubernetes.io/trainyard-init", "localhost/k8s-train", "unrelated", "unconfined")},
		"an Unconfined field": {tmpl: `{"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.securityContext.appArmorProfile.type"}},
		"RuntimeDefault and Localhost fields": {tmpl: `{"spec": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
			"containers": [{"name": "worker", "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-train"}}}]}}`},
	})
}

func TestSeccomp(t *testing.T) {
	runCases(t, map[string]policyCase{
		"an Unconfined field": {tmpl: `{"spec": {"containers": [{"name": "worker", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.containers[0].securityContext.seccompProfile.type"}},
		"the pod's profile removed": {tmpl: `{"spec": {"securityContext": {"seccompProfile": null}}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.securityContext.seccompProfile"}},
		"the pod's profile removed, every container with its own": {tmpl: `{"spec": {"securityContext": {"seccompProfile": null},
			"initContainers": [{"name": "trainyard-init", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}],
			"containers": [{"name": "worker", "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "train.json"}}}]}}`},
		"an unconfined container annotation": {change: podAnnotations("container.seccomp.security.alpha.kubernetes.io/worker", "unconfined"),
			want: []string{"spec.kubernetes.podAnnotations[container.seccomp.security.alpha.kubernetes.io/worker]"}},
		"the pod annotation's runtime default": {change: podAnnotations("seccomp.security.alpha.kubernetes.io/pod", "runtime/default")},
	})
}

func TestSELinux(t *testing.T) {
	runCases(t, map[string]policyCase{
		"the pod's spc_t": {tmpl: `{"spec": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.securityContext.seLinuxOptions.type"}},
		"a container's spc_t": {tmpl: `{"spec": {"containers": [{"name": "worker", "securityContext": {"seLinuxOptions": {"type": "spc_t"}}}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.containers[0].securityContext.seLinuxOptions.type"}},
		"a user and a role": {tmpl: `{"spec": {"initContainers": [{"name": "trainyard-init",
			"securityContext": {"seLinuxOptions": {"user": "system_u", "role": "system_r"}}}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.initContainers[0].securityContext.seLinuxOptions.user",
				"spec.kubernetes.podTemplate.spec.initContainers[0].securityContext.seLinuxOptions.role"}},
		"the container types and a level": {tmpl: `{"spec": {"securityContext": {"seLinuxOptions": {"type": "container_t", "level": "s0:c123,c456"}},
			"containers": [{"name": "worker", "securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}}]}}`},
	})
}

func TestProcMount(t *testing.T) {
	runCases(t, map[string]policyCase{
		"unmasked": {tmpl: `{"spec": {"containers": [{"name": "worker", "securityContext": {"procMount": "Unmasked"}}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.containers[0].securityContext.procMount"}},
		"the default": {tmpl: `{"spec": {"containers": [{"name": "worker", "securityContext": {"procMount": "Default"}}]}}`},
	})
}

func TestSysctls(t *testing.T) {
	var safe []string
	for _, s := range podpolicy.SafeSysctls {
		safe = append(safe, fmt.Sprintf(`{"name": %q, "value": "1"}`, s))
	}
	runCases(t, map[string]policyCase{
		"unsafe ones": {tmpl: `{"spec": {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"},
			{"name": "net.ipv4.tcp_syncookies", "value": "1"}, {"name": "net/core/somaxconn", "value": "1024"}]}}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.securityContext.sysctls[0].name",
				"spec.kubernetes.podTemplate.spec.securityContext.sysctls[2].name"}},
		"the safe ones, with dots or slashes": {tmpl: `{"spec": {"securityContext": {"sysctls": [` + strings.Join(safe, ", ") +
			`, {"name": "net/ipv4/ip_local_port_range", "value": "1024 65535"}]}}}`},
	})
}

func TestPrivilegeEscalation(t *testing.T) {
	runCases(t, map[string]policyCase{
		"true": {tmpl: `{"spec": {"initContainers": [{"name": "trainyard-init", "securityContext": {"allowPrivilegeEscalation": true}}],
			"containers": [{"name": "worker", "securityContext": {"allowPrivilegeEscalation": true}}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.initContainers[0].securityContext.allowPrivilegeEscalation",
				"spec.kubernetes.podTemplate.spec.containers[0].securityContext.allowPrivilegeEscalation"}},
		"false, as Trainyard sets it": {tmpl: `{"spec": {"containers": [{"name": "worker", "securityContext": {"allowPrivilegeEscalation": false}}]}}`},
		"a sidecar that says nothing": {tmpl: `{"spec": {"containers": [{"name": "sidecar", "image": "busybox"}]}}`},
	})
}

func TestRuntimeClassName(t *testing.T) {
	runCases(t, map[string]policyCase{
		"a RuntimeClass": {tmpl: `{"spec": {"runtimeClassName": "nvidia"}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.runtimeClassName"}},
		"the node's default runtime": {tmpl: `{"spec": {"nodeSelector": {"gpu": "h100"}}}`},
	})
}

// A pod bound to a node skips the scheduler; tolerations are left to the scheduler, and
// to the cluster's admission (doc.go).
func TestNodeName(t *testing.T) {
	runCases(t, map[string]policyCase{
		"a node": {tmpl: `{"spec": {"nodeName": "control-plane-1", "tolerations": [{"operator": "Exists"}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.nodeName"}},
		"nodes chosen by label, every taint tolerated": {tmpl: `{"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
			{"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}]}}}}}`,
			change: func(j *v1.TrainJob) {
				j.Spec.Kubernetes.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}},
	})
}

func TestProbeAndLifecycleHosts(t *testing.T) {
	runCases(t, map[string]policyCase{
		"hosts": {tmpl: `{"spec": {"containers": [{"name": "sidecar", "image": "busybox",
			"livenessProbe": {"httpGet": {"host": "169.254.169.254", "port": 80}}, "startupProbe": {"tcpSocket": {"host": "10.0.0.1", "port": 2379}},
			"lifecycle": {"preStop": {"httpGet": {"host": "kubernetes.default", "port": 443}}}},
			{"name": "worker", "readinessProbe": {"tcpSocket": {"host": "node", "port": 10250}}}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.containers[0].livenessProbe.httpGet.host",
				"spec.kubernetes.podTemplate.spec.containers[0].startupProbe.tcpSocket.host",
				"spec.kubernetes.podTemplate.spec.containers[0].lifecycle.preStop.httpGet.host",
				"spec.kubernetes.podTemplate.spec.containers[1].readinessProbe.tcpSocket.host"}},
		"the pod's own address": {tmpl: `{"spec": {"containers": [{"name": "worker",
			"readinessProbe": {"httpGet": {"path": "/ready", "port": 29501}}, "lifecycle": {"postStart": {"exec": {"command": ["true"]}}}}]}}`},
	})
}

func TestEphemeralContainers(t *testing.T) {
	runCases(t, map[string]policyCase{
		"one": {tmpl: `{"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox"}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.ephemeralContainers"}},
	})
}

// refusedVolumes are a minimal source of every volume type Pod Security Standards'
// restricted level refuses.
var refusedVolumes = map[string]string{
	"hostPath": `{"path": "/"}`, "gcePersistentDisk": `{"pdName": "d"}`, "awsElasticBlockStore": `{"volumeID": "v"}`,
	"gitRepo": `{"repository": "https://git.example.com/x.git"}`, "nfs": `{"server": "nfs.example.com", "path": "/"}`,
	"iscsi":     `{"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:storage", "lun": 0}`,
	"glusterfs": `{"endpoints": "e", "path": "p"}`, "rbd": `{"monitors": ["m"], "image": "i"}`, "flexVolume": `{"driver": "d"}`,
	"cinder": `{"volumeID": "v"}`, "cephfs": `{"monitors": ["m"]}`, "flocker": `{"datasetName": "d"}`, "fc": `{"lun": 0}`,
	"azureFile": `{"secretName": "azure", "shareName": "s"}`, "vsphereVolume": `{"volumePath": "p"}`,
	"quobyte": `{"registry": "r", "volume": "v"}`, "azureDisk": `{"diskName": "d", "diskURI": "u"}`,
	"photonPersistentDisk": `{"pdID": "p"}`, "portworxVolume": `{"volumeID": "v"}`,
	"scaleIO": `{"gateway": "g", "system": "s", "secretRef": {"name": "sio"}}`, "storageos": `{"volumeName": "v"}`,
}

func TestVolumeTypes(t *testing.T) {
	cases := map[string]policyCase{
		"the allowed types": {tmpl: `{"spec": {"volumes": [{"name": "a", "configMap": {"name": "c"}}, {"name": "b", "csi": {"driver": "d"}},
			{"name": "c", "downwardAPI": {}}, {"name": "d", "emptyDir": {}}, {"name": "e", "persistentVolumeClaim": {"claimName": "data"}},
			{"name": "f", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
			{"name": "g", "projected": {"sources": []}}, {"name": "h", "secret": {"secretName": "s"}},
			{"name": "i", "image": {"reference": "registry.example.com/data:1"}}]}}`},
		"an inline nfs in spec.kubernetes.volumes": {change: func(j *v1.TrainJob) {
			j.Spec.Kubernetes.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}}}
		}, want: []string{"spec.kubernetes.volumes[0].nfs"}},
	}
	for typ, src := range refusedVolumes {
		cases[typ] = policyCase{tmpl: `{"spec": {"volumes": [{"name": "x", "emptyDir": {}}, {"name": "v", "` + typ + `": ` + src + `}]}}`,
			want: []string{"spec.kubernetes.podTemplate.spec.volumes[1]." + typ}}
	}
	runCases(t, cases)
}

// Every Secret a volume reads is checked, in a refused volume type too.
func TestVolumeSecrets(t *testing.T) {
	access := &podpolicy.Access{Secrets: []string{"shared"}}
	volume := func(typ, src string) string {
		return `{"spec": {"volumes": [{"name": "v", "` + typ + `": ` + src + `}]}}`
	}
	const tv = "spec.kubernetes.podTemplate.spec.volumes[0]."
	runCases(t, map[string]policyCase{
		"csi": {tmpl: volume("csi", `{"driver": "d", "nodePublishSecretRef": {"name": "other"}}`), access: access,
			want: []string{tv + "csi.nodePublishSecretRef.name"}},
		"csi with a labelled Secret": {tmpl: volume("csi", `{"driver": "d", "nodePublishSecretRef": {"name": "shared"}}`), access: access},
		"projected": {tmpl: volume("projected", `{"sources": [{"secret": {"name": "shared"}}, {"secret": {"name": "other"}}]}`), access: access,
			want: []string{tv + "projected.sources[1].secret.name"}},
		"cephfs": {tmpl: volume("cephfs", `{"monitors": ["m"], "secretRef": {"name": "other"}}`), access: access,
			want: []string{tv + "cephfs", tv + "cephfs.secretRef.name"}},
		"rbd": {tmpl: volume("rbd", `{"monitors": ["m"], "image": "i", "secretRef": {"name": "other"}}`), access: access,
			want: []string{tv + "rbd", tv + "rbd.secretRef.name"}},
		"flexVolume": {tmpl: volume("flexVolume", `{"driver": "d", "secretRef": {"name": "other"}}`), access: access,
			want: []string{tv + "flexVolume", tv + "flexVolume.secretRef.name"}},
		"azureFile": {tmpl: volume("azureFile", `{"secretName": "other", "shareName": "s"}`), access: access,
			want: []string{tv + "azureFile", tv + "azureFile.secretName"}},
		"iscsi": {tmpl: volume("iscsi", `{"targetPortal": "p", "iqn": "i", "lun": 0, "secretRef": {"name": "other"}}`), access: access,
			want: []string{tv + "iscsi", tv + "iscsi.secretRef.name"}},
		"scaleIO": {tmpl: volume("scaleIO", `{"gateway": "g", "system": "s", "secretRef": {"name": "other"}}`), access: access,
			want: []string{tv + "scaleIO", tv + "scaleIO.secretRef.name"}},
		"storageos": {tmpl: volume("storageos", `{"volumeName": "v", "secretRef": {"name": "other"}}`), access: access,
			want: []string{tv + "storageos", tv + "storageos.secretRef.name"}},
		"cinder": {tmpl: volume("cinder", `{"volumeID": "v", "secretRef": {"name": "other"}}`), access: access,
			want: []string{tv + "cinder", tv + "cinder.secretRef.name"}},
		"a refused type with a labelled Secret": {tmpl: volume("cephfs", `{"monitors": ["m"], "secretRef": {"name": "shared"}}`),
			access: access, want: []string{tv + "cephfs"}},
	})
}

func TestImagePullSecrets(t *testing.T) {
	pull := func(j *v1.TrainJob) {
		j.Spec.Kubernetes.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	}
	runCases(t, map[string]policyCase{
		"in spec.kubernetes": {change: pull, access: &podpolicy.Access{},
			want: []string{"spec.kubernetes.imagePullSecrets[0].name"}},
		"in the pod template": {tmpl: `{"spec": {"imagePullSecrets": [{"name": "other"}]}}`, change: pull,
			access: &podpolicy.Access{Secrets: []string{"regcred"}},
			want:   []string{"spec.kubernetes.podTemplate.spec.imagePullSecrets[0].name"}},
		"labelled":         {change: pull, access: &podpolicy.Access{Secrets: []string{"regcred"}}},
		"no cluster asked": {change: pull},
	})
}

// Referenced lists every Secret a pod reads, sorted, each once, whatever reads it.
func TestReferencedSecrets(t *testing.T) {
	ref := func(name string) *corev1.LocalObjectReference { return &corev1.LocalObjectReference{Name: name} }
	pod := &corev1.PodSpec{
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}, {Name: "csi"}},
		Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}}}},
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: ref("csi")}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{SecretRef: ref("cephfs")}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{SecretRef: ref("rbd")}}},
			{Name: "d", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{SecretRef: ref("flex")}}},
			{Name: "e", VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "azure"}}},
			{Name: "f", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{SecretRef: ref("iscsi")}}},
			{Name: "g", VolumeSource: corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{SecretRef: ref("scaleio")}}},
			{Name: "h", VolumeSource: corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{SecretRef: ref("storageos")}}},
			{Name: "i", VolumeSource: corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{SecretRef: ref("cinder")}}},
			{Name: "j", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "pull"}}},
			{Name: "k", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}}},
		},
	}
	want := []string{"azure", "cephfs", "cinder", "csi", "env", "flex", "iscsi", "pull", "rbd", "scaleio", "storageos"}
	if diff := cmp.Diff(want, podpolicy.Referenced(pod).Secrets); diff != "" {
		t.Errorf("Secrets (-want +got):\n%s", diff)
	}
}

// CheckPod reads a rendered pod's annotations, and names them by the pod's own field.
func TestCheckPodAnnotations(t *testing.T) {
	meta := &metav1.ObjectMeta{Annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/worker": "unconfined",
		"seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}}
	pod := &corev1.PodSpec{Containers: []corev1.Container{{Name: "worker"}},
		SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}}
	got := podpolicy.CheckPod(meta, pod, nil)
	want := []string{"metadata.annotations[container.apparmor.security.beta.kubernetes.io/worker]"}
	if diff := cmp.Diff(want, got.Fields()); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	if got := podpolicy.Check(pod, nil); len(got) != 0 {
		t.Errorf("Check, which sees no annotations: %v", got)
	}
}

// The messages say what is refused and what to do instead.
func TestRestrictedMessages(t *testing.T) {
	got := check(t, job(`{"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/worker": "unconfined"}},
		"spec": {"runtimeClassName": "kata", "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]},
		"containers": [{"name": "worker", "securityContext": {"seLinuxOptions": {"type": "spc_t"}}}],
		"volumes": [{"name": "code", "gitRepo": {"repository": "https://git.example.com/x.git"}}, {"name": "nfs", "nfs": {"server": "s", "path": "/"}}]}}`,
		nil), nil).Error()
	for _, want := range []string{
		"spec.kubernetes.podTemplate.metadata.annotations[container.apparmor.security.beta.kubernetes.io/worker]: profile unconfined is refused: " +
			"use runtime/default or localhost/NAME",
		"spec.kubernetes.podTemplate.spec.securityContext.sysctls[0].name: sysctl kernel.msgmax is refused",
		"spec.kubernetes.podTemplate.spec.runtimeClassName: choosing a RuntimeClass is refused",
		"spec.kubernetes.podTemplate.spec.containers[0].securityContext.seLinuxOptions.type: SELinux type spc_t is refused",
		"spec.kubernetes.podTemplate.spec.volumes[0].gitRepo: gitRepo volumes are refused (the kubelet runs git on the node: CVE-2024-10220): " +
			"clone with spec.source.git",
		"spec.kubernetes.podTemplate.spec.volumes[1].nfs: nfs volumes are refused: mount a PersistentVolumeClaim",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the violations lack %q:\n%s", want, got)
		}
	}
}
