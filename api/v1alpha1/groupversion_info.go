// Package v1alpha1 holds the TrainJob API of the trainyard.dev group, version v1alpha1.
//
// The same Go types serve every backend: `trainyard run` and the job server read a TrainJob
// from a YAML file or from flags, and the Kubernetes operator serves it as a custom resource.
// Defaulting and validation live in internal/jobspec so that all backends share them.
//
// +kubebuilder:object:generate=true
// +groupName=trainyard.dev
package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// Group and Version name the API; Kind is the one kind it serves.
const (
	Group   = "trainyard.dev"
	Version = "v1alpha1"
	Kind    = "TrainJob"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// APIVersion is the apiVersion string a TrainJob document carries.
var APIVersion = GroupVersion.String()
