// Package replay answers "would this policy have caught last Tuesday's outage, and how often
// would it have ejected a healthy provider?" offline: it feeds a proxy access log, in timestamp
// order, through the same health engine the proxy runs (internal/health), on a virtual clock
// taken from the log, and reports what the policy would have done.
//
// It never sleeps and never reads the wall clock: the same log, policy and options give a
// byte-identical JSON report. It reads the log in one pass with memory bounded by the traffic of
// the reorder tolerance and the request linger (about a minute of log), never by the log's size.
// It must not change the engine's behaviour to fit history: when the log cannot tell what a
// channel would have answered, the report says so (probes unanswered, attempts assumed) instead
// of inventing outcomes.
//
// docs/replay.md documents the rules: which logged attempts reach the engine in each phase, how
// probes are answered from the log, the failover model behind the client-visible failure rates,
// and how incidents are scored.
package replay
