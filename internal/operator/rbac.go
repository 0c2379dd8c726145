package operator

// The operator's permissions, generated into config/rbac by `make generate`.
//
// +kubebuilder:rbac:groups=trainyard.dev,resources=trainjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=trainyard.dev,resources=trainjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=trainyard.dev,resources=trainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;delete;deletecollection
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
