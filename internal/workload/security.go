package workload

import corev1 "k8s.io/api/core/v1"

// The defaults that harden every pod Trainyard renders (workers, their init container,
// TensorBoard), as Pod Security Standards' restricted level asks, but for running as
// root, which training images do. A pod template may change them; the operator's pod
// policy (internal/podpolicy) refuses what goes past the baseline level.

// containerSecurity is the securityContext of every container Trainyard renders: no
// privilege escalation (setuid binaries, file capabilities), no capabilities.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// podSecurity is the securityContext of every pod Trainyard renders: the container
// runtime's default seccomp profile.
func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}
