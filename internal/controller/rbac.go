package controller

// The controller's permissions, generated into config/rbac/role.yaml by `make manifests`.
// Namespaced rules name the default deployment namespace; kustomize's namespace transformer moves
// them with the rest of config/default. The proxy's own, narrower Role (get/list/watch on the one
// ConfigMap and Secret, by resourceNames) is in config/proxy: it belongs to another identity and
// another role name, which this package's generation run does not produce.

// +kubebuilder:rbac:groups=switchyard.io,resources=providerchannels;routingpolicies;gatewayclients,verbs=get;list;watch
// The controller ends an expired on-call override (spec.disabled* after disabledUntil): patch.
// +kubebuilder:rbac:groups=switchyard.io,resources=providerchannels,verbs=patch
// +kubebuilder:rbac:groups=switchyard.io,resources=providerchannels/status;routingpolicies/status;gatewayclients/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// client-go's leader election records its Event in the core group, in the Lease's namespace.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=switchyard-system
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch,namespace=switchyard-system
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;update;patch,namespace=switchyard-system
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch,namespace=switchyard-system
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=switchyard-system
