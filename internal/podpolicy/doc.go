// Package podpolicy is the operator's pod policy: what a TrainJob may ask of the pods
// that Trainyard creates for it. Creating a TrainJob makes the operator create pods with
// its own rights, so without a policy whoever may create TrainJobs may create any pod.
//
// Under the Restricted level (the default) a worker pod may not have privileged
// containers, host namespaces (hostNetwork, hostPID, hostIPC, host ports, Windows host
// processes), hostPath volumes, capabilities beyond the container runtime's defaults,
// an Unconfined seccomp or AppArmor profile, an unmasked /proc, a ServiceAccount other
// than the namespace's default one unless it is labelled v1alpha1.LabelTrainJobAccess,
// or a Secret (git credentials, a secret volume, a secret variable) unless it is labelled
// so or owned by the TrainJob. Off, an administrator's choice, allows everything.
//
// The policy is pure: Check takes a rendered pod spec and what the caller knows of the
// namespace's ServiceAccounts and Secrets (Access), and returns the Violations, each
// named by the TrainJob field that asks for it (CheckTrainJob) or by the pod's own field
// (Check). The operator (internal/operator) and `trainyard submit --kube`
// (internal/kubecli) both call it, so that submit refuses up front what the operator
// would refuse.
package podpolicy
