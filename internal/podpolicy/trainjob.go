package podpolicy

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/workload"
)

// templatePrefix starts the path of a field of spec.kubernetes.podTemplate's pod spec.
const templatePrefix = "spec.kubernetes.podTemplate.spec."

// CheckTrainJob returns what the restricted policy refuses in pod, a worker pod rendered
// for job (workload.Render, the user's pod template merged in), each named by the field
// of the TrainJob that asks for it: spec.kubernetes.podTemplate.spec...,
// spec.kubernetes.podTemplate.metadata.annotations[KEY], spec.kubernetes.podAnnotations[KEY],
// spec.kubernetes.volumes[i]..., spec.kubernetes.imagePullSecrets[i].name,
// spec.kubernetes.serviceAccountName or spec.source.git.credentialsSecret. The pod's
// annotations are read from job (spec.kubernetes.podAnnotations, with the pod template's
// over them), as workload.Render puts them on the pod.
func CheckTrainJob(job *v1.TrainJob, pod *corev1.PodSpec, access *Access) Violations {
	tmpl := userTemplate(job)
	var out Violations
	for _, f := range findings(podAnnotations(job, tmpl), pod) {
		if f.allowed(access) || f.secret != "" && f.secret == workload.GangSecretName(job.Name) {
			continue // the job's own gang Secret, which the operator makes for it
		}
		out = append(out, Violation{Field: jobPath(job, tmpl, pod, f.at), Detail: f.detail})
	}
	return out
}

// userTemplate is job's spec.kubernetes.podTemplate, or nil.
func userTemplate(job *v1.TrainJob) *corev1.PodTemplateSpec {
	k := job.Spec.Kubernetes
	if k == nil || k.PodTemplate == nil || len(k.PodTemplate.Raw) == 0 {
		return nil
	}
	var t corev1.PodTemplateSpec
	if err := json.Unmarshal(k.PodTemplate.Raw, &t); err != nil {
		return nil // workload.Render refuses it first
	}
	return &t
}

// podAnnotations are the annotations of job's worker pods: spec.kubernetes.podAnnotations,
// with the pod template's over them.
func podAnnotations(job *v1.TrainJob, tmpl *corev1.PodTemplateSpec) map[string]string {
	out := map[string]string{}
	if k := job.Spec.Kubernetes; k != nil {
		maps.Copy(out, k.PodAnnotations)
	}
	if tmpl != nil {
		maps.Copy(out, tmpl.Annotations)
	}
	return out
}

// jobPath names a location of the rendered pod by the TrainJob's field that put it there:
// the pod template when it has the field's item (it is merged last), else the field of
// spec.kubernetes or spec.source that Trainyard renders it from; else the pod's own path.
func jobPath(job *v1.TrainJob, t *corev1.PodTemplateSpec, pod *corev1.PodSpec, at location) string {
	k := job.Spec.Kubernetes
	if k == nil {
		k = &v1.KubernetesSpec{}
	}
	var tmpl *corev1.PodSpec
	if t != nil {
		tmpl = &t.Spec
	}
	switch at.list {
	case "":
		if strings.HasPrefix(at.path, "serviceAccount") && (tmpl == nil || tmpl.ServiceAccountName == "" && tmpl.DeprecatedServiceAccount == "") {
			return "spec.kubernetes.serviceAccountName"
		}
		return templatePrefix + at.path
	case listAnnotations:
		if t != nil && t.Annotations[at.name] != "" {
			return "spec.kubernetes.podTemplate.metadata.annotations[" + at.name + "]"
		}
		if _, ok := k.PodAnnotations[at.name]; ok {
			return "spec.kubernetes.podAnnotations[" + at.name + "]"
		}
	case listVolumes, listImagePullSecrets:
		if i := itemIndex(tmpl, at.list, at.name); i >= 0 {
			return fmt.Sprintf("%s%s[%d].%s", templatePrefix, at.list, i, at.path)
		}
		if i := itemIndex(&corev1.PodSpec{Volumes: k.Volumes, ImagePullSecrets: k.ImagePullSecrets}, at.list, at.name); i >= 0 {
			return fmt.Sprintf("spec.kubernetes.%s[%d].%s", at.list, i, at.path)
		}
	default:
		if i := itemIndex(tmpl, at.list, at.name); i >= 0 && (at.sub == "" || at.subIndex(tmpl) >= 0) {
			return fmt.Sprintf("%s%s[%d].%s", templatePrefix, at.list, i, at.itemPath(at.subIndex(tmpl)))
		}
		if at.list == listInitContainers && at.sub == "env" && job.Spec.Source != nil &&
			job.Spec.Source.Git != nil && job.Spec.Source.Git.CredentialsSecret != "" {
			return "spec.source.git.credentialsSecret"
		}
	}
	return "pod " + at.podPath(pod)
}
