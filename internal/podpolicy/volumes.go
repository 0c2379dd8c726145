package podpolicy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// VolumeTypes are the volume sources a pod may have inline (Pod Security Standards'
// restricted list): any other (hostPath, nfs, iscsi, gitRepo, cephfs, ...) is refused.
// The storage they reach is mounted through a PersistentVolumeClaim instead, whose
// PersistentVolume an administrator made.
var VolumeTypes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim",
	"projected", "secret"}

// volumeFindings lists what the policy refuses of one volume: a type beyond
// VolumeTypes, and the Secrets it reads (those of a refused type too, so that the
// caller looks them up and reports them).
func volumeFindings(v *corev1.Volume) []finding {
	var out []finding
	at := func(path string) location { return location{list: listVolumes, name: v.Name, path: path} }
	for _, t := range volumeTypes(&v.VolumeSource) {
		if !slices.Contains(VolumeTypes, t) {
			out = append(out, finding{at: at(t), detail: volumeDetail(t)})
		}
	}
	for _, s := range volumeSecrets(v) {
		out = append(out, finding{at: at(s.path), secret: s.name, detail: fmt.Sprintf(secretDetail, s.name)})
	}
	return out
}

// volumeDetail says why a volume type is refused and what to do instead.
func volumeDetail(t string) string {
	switch t {
	case "hostPath":
		return "hostPath volumes are refused: mount a PersistentVolumeClaim " +
			"(an administrator may bind one to a host folder with a hostPath PersistentVolume)"
	case "gitRepo":
		return "gitRepo volumes are refused (the kubelet runs git on the node: CVE-2024-10220): " +
			"clone with spec.source.git, or in an init container"
	}
	return fmt.Sprintf("%s volumes are refused: mount a PersistentVolumeClaim (an administrator makes its PersistentVolume); "+
		"inline volumes may be %s", t, strings.Join(VolumeTypes, ", "))
}

// volumeTypes are the names (as in JSON) of the volume sources that src sets: one in a
// valid volume; none means an emptyDir.
func volumeTypes(src *corev1.VolumeSource) []string {
	var out []string
	v := reflect.ValueOf(src).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
	}
	return out
}

// secretRef is a Secret a volume reads, and the field that names it.
type secretRef struct{ path, name string }

// volumeSecrets are the Secrets v reads: its content, or the credentials its driver
// mounts it with.
func volumeSecrets(v *corev1.Volume) []secretRef {
	var out []secretRef
	ref := func(path string, r *corev1.LocalObjectReference) {
		if r != nil && r.Name != "" {
			out = append(out, secretRef{path + ".name", r.Name})
		}
	}
	s := &v.VolumeSource
	if s.Secret != nil && s.Secret.SecretName != "" {
		out = append(out, secretRef{"secret.secretName", s.Secret.SecretName})
	}
	if s.Projected != nil {
		for i, p := range s.Projected.Sources {
			if p.Secret != nil {
				ref(fmt.Sprintf("projected.sources[%d].secret", i), &p.Secret.LocalObjectReference)
			}
		}
	}
	if s.AzureFile != nil && s.AzureFile.SecretName != "" {
		out = append(out, secretRef{"azureFile.secretName", s.AzureFile.SecretName})
	}
	if s.CSI != nil {
		ref("csi.nodePublishSecretRef", s.CSI.NodePublishSecretRef)
	}
	if s.CephFS != nil {
		ref("cephfs.secretRef", s.CephFS.SecretRef)
	}
	if s.Cinder != nil {
		ref("cinder.secretRef", s.Cinder.SecretRef)
	}
	if s.FlexVolume != nil {
		ref("flexVolume.secretRef", s.FlexVolume.SecretRef)
	}
	if s.ISCSI != nil {
		ref("iscsi.secretRef", s.ISCSI.SecretRef)
	}
	if s.RBD != nil {
		ref("rbd.secretRef", s.RBD.SecretRef)
	}
	if s.ScaleIO != nil {
		ref("scaleIO.secretRef", s.ScaleIO.SecretRef)
	}
	if s.StorageOS != nil {
		ref("storageos.secretRef", s.StorageOS.SecretRef)
	}
	return out
}
