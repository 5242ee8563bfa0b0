// Package fleet is the I/O half of the shared judgement of a fleet of proxy replicas: a store in
// Redis (or Valkey, single node, Redis 6+) through which replicas exchange their health evidence,
// the verdicts the first replica to trip sets, one probe lease per key, the latest Retry-After
// and the GatewayClients' usage, and the loop that runs the exchange once per sync interval.
//
// What it must never do: decide health (the engine in internal/health decides, on the figures
// this package brings it), make a request wait on Redis (the loop runs off the request path;
// every call has a short deadline), or show the store's password anywhere (Endpoint.String
// redacts it). When the store is slow, down or unreachable for a few seconds, the replica runs
// on its local evidence alone (Link says so) and rejoins by itself.
//
// One sync is one round trip: a single Lua script (EVALSHA, EVAL when the server has not cached
// it) that writes this replica's deltas and reads what the others wrote. The script builds its
// key names itself, so it needs a single node (no Redis Cluster); every key starts with the
// fleet's prefix, so several gateways may share one server.
package fleet
