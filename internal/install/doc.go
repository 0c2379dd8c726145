// Package install puts the Trainyard operator on a Kubernetes cluster and takes it off
// again: it renders the manifests embedded from config/ (the TrainJob CRD, the generated
// ClusterRole, and templates of the Namespace, ServiceAccount, ClusterRoleBinding and
// operator Deployment) for given options, applies them with server-side apply, and
// deletes them. `trainyard install` and `trainyard uninstall` are thin commands over it.
package install
