// Package podpolicy is the operator's pod policy: what a TrainJob may ask of the pods
// that Trainyard creates for it. Creating a TrainJob makes the operator create pods with
// its own rights, so without a policy whoever may create TrainJobs may create any pod.
//
// # Restricted
//
// The Restricted level (the default) follows Pod Security Standards' baseline level
// field by field, and the volume list of its restricted level. A worker pod may not have:
//
//   - privileged containers, host namespaces (hostNetwork, hostPID, hostIPC, host ports,
//     Windows host processes), or a probe or lifecycle handler that names a host;
//   - capabilities beyond the container runtime's defaults (DefaultCapabilities), or
//     allowPrivilegeEscalation: true;
//   - an Unconfined seccomp or AppArmor profile, in a field or in the deprecated
//     annotations (container.apparmor.security.beta.kubernetes.io/NAME: unconfined), or no
//     seccomp profile at all (Trainyard sets RuntimeDefault; a template may not remove it);
//   - SELinux types other than SELinuxTypes, or an SELinux user or role;
//   - an unmasked /proc, sysctls other than SafeSysctls, or ephemeral containers;
//   - inline volumes other than VolumeTypes: hostPath, nfs, iscsi, gitRepo (CVE-2024-10220),
//     cephfs, rbd and the other node or network volumes; a PersistentVolumeClaim mounts
//     such storage instead;
//   - a runtimeClassName (a runtime handler may isolate less than the node's default), or
//     a nodeName (it bypasses the scheduler);
//   - a ServiceAccount other than the namespace's default one unless it is labelled
//     v1alpha1.LabelTrainJobAccess, or a Secret unless it is labelled so or owned by the
//     TrainJob: every Secret the pod can read or use is checked (git credentials, secret
//     and projected volumes, variables, a volume driver's secretRef or
//     nodePublishSecretRef, imagePullSecrets), in a refused volume type too.
//
// Values are refused where the user sets them; unset fields keep what Trainyard renders.
// Unlike Pod Security Standards' restricted level, the workers may run as root, with
// runAsNonRoot unset or false and runAsUser 0: most training images run as root, and the
// image's user is its author's choice anyway. Capabilities dropped by Trainyard may be
// added back up to the runtime's defaults, and a container the template adds may leave
// allowPrivilegeEscalation unset. Tolerations are not refused, every taint included
// (submit's --toleration all): taints steer the scheduler and fence nothing, since any
// key may be tolerated by name; a cluster that keeps nodes for others restricts
// tolerations at admission (PodTolerationRestriction). Namespaces that need Pod Security
// Standards' restricted level enforce it with the pod-security.kubernetes.io labels.
//
// Off, an administrator's choice, allows everything.
//
// # Use
//
// The policy is pure: Check takes a rendered pod spec and what the caller knows of the
// namespace's ServiceAccounts and Secrets (Access), and returns the Violations, each
// named by the TrainJob field that asks for it (CheckTrainJob, which reads the pods'
// annotations from the TrainJob) or by the pod's own field (Check; CheckPod with the
// pod's metadata). Referenced lists the ServiceAccounts and Secrets to look up. The
// operator (internal/operator) and `trainyard submit --kube` (internal/kubecli) both call
// it, so that submit refuses up front what the operator would refuse.
package podpolicy
