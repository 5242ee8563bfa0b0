// Package controller is Switchyard's Kubernetes control loop: it compiles ProviderChannel,
// RoutingPolicy and GatewayClient objects into the proxy's routing ConfigMap (provider keys into a
// Secret beside it; clients' keys only as hashes), reports compile problems as status conditions
// and Events, and turns the proxy replicas' admin API (live health per channel×model, clients'
// use and the transition journal) into status and Events.
//
// It must never decide health itself (the proxies do, in internal/health), never put a provider key
// anywhere but the credentials Secret, and never overwrite a good proxy config with one that has
// problems: the last good config keeps serving while the problems show up as status.
//
// Everything that can be decided without I/O (aggregation across replicas, status and conditions,
// the journal's de-duplication, who flipped spec.disabled) is a pure function in this package,
// table-tested without a cluster; the reconcilers gather inputs, call those functions and write once.
//
// The table is compiled in one place, the CompileReconciler: every event that can change it maps
// to its single request, so a burst of events is one compile. Each compile is kept as an immutable
// Snapshot, and only the objects whose status it changes are queued to the status reconcilers
// (ChannelReconciler, PolicyReconciler, ClientReconciler), which read the snapshot and the
// poller's live view and patch status, and never compile. The poller queues a channel only when
// its status would be written (the rule in significant), a client by its own rule
// (clientNeedsReconcile). The kinds compiled into the table are listed once, in inputKinds.
package controller
