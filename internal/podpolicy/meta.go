package podpolicy

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// annotationFindings lists the annotations the policy refuses: the deprecated AppArmor
// and seccomp annotations, when they ask for a profile other than the runtime's default
// or one loaded on the node. The API server copies them into a container's
// securityContext where it sets no profile.
func annotationFindings(annotations map[string]string) []finding {
	var out []finding
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		v := annotations[k]
		var ok bool
		switch {
		case strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix):
			ok = v == "" || v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault ||
				strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
		case k == corev1.SeccompPodAnnotationKey || strings.HasPrefix(k, corev1.SeccompContainerAnnotationKeyPrefix):
			ok = v == "" || v == corev1.SeccompProfileRuntimeDefault || v == corev1.DeprecatedSeccompProfileDockerDefault ||
				strings.HasPrefix(v, corev1.SeccompLocalhostProfileNamePrefix)
		default:
			continue
		}
		if !ok {
			out = append(out, finding{at: location{list: listAnnotations, name: k},
				detail: "profile " + v + " is refused: use runtime/default or localhost/NAME, or leave the annotation out"})
		}
	}
	return out
}
