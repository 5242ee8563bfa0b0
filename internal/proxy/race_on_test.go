//go:build race

package proxy

// raceEnabled: the race detector slows the proxy 5-10 times, which the tests that measure
// wall-clock latency against a rule's limit would measure instead.
const raceEnabled = true
