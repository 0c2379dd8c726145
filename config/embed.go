// Package config holds Trainyard's Kubernetes manifests, embedded in the binary so that
// `trainyard install` needs nothing but a kubeconfig:
//
//	crd/bases/   the TrainJob CustomResourceDefinition, generated from api/ (make generate)
//	rbac/        the operator's ClusterRole, generated from internal/operator/rbac.go
//	manager/     templates (Go text/template) of the Namespace, ServiceAccount,
//	             ClusterRoleBinding (and RoleBindings for one namespace), the metrics
//	             reader's ClusterRole, the room probes' PriorityClass and the operator
//	             Deployment, filled in by
//	             internal/install
//
// The Helm chart (charts/trainyard) carries copies of the generated files, made by
// `make generate`. The package is here, not under internal/, because go:embed cannot
// reach a parent folder, and the manifests belong in config/ beside the other generated ones.
package config

import "embed"

// FS holds the manifests and templates under their paths in this folder, e.g.
// "crd/bases/trainyard.dev_trainjobs.yaml".
//
//go:embed crd/bases/*.yaml rbac/role.yaml manager/*.yaml rayapi/*.yaml
var FS embed.FS
