// Package failover is the one failover planner of Switchyard: given a request's route (the
// compiled candidates of its model, their failure domains, the fallback and context-overflow
// chains), the health engine's view, what the request tried so far and how each try ended, it
// says what to do next: try this channel, wait this long, or stop with this answer.
//
// The proxy wraps it with I/O (HTTP attempts, sleeping, writing the answer); `switchyard replay`
// drives it with logged outcomes on the log's clock; `switchyard simulate` drives it with
// simulated outcomes on a virtual clock. All three therefore decide alike, which is what makes a
// backtest evidence rather than a story (internal/failover/differential_test.go checks it over
// real HTTP).
//
// It must stay pure: no I/O, no goroutines, no sleeping, no wall clock, no global randomness. Time
// comes in as an argument, randomness from an injected Rand, health from the engine through the
// small Health interface (the engine owns health: the planner asks it, never decides it), and the
// only shared state it touches is the policy's retry Budget.
//
// It lives in its own package rather than in internal/routing because routing is the compiled
// table, a translation of manifests that must not depend on how the engine orders channels;
// the planner depends on both.
package failover
