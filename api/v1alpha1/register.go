package v1alpha1

import "sigs.k8s.io/controller-runtime/pkg/scheme"

var (
	// SchemeBuilder registers the TrainJob types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group and version to a scheme, e.g. the one a
	// controller-runtime client uses.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&TrainJob{}, &TrainJobList{})
}
