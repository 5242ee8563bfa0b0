package failover

import "github.com/switchyard-io/switchyard/internal/health"

// Continuation orders the channels that may finish a stream which broke after text reached the
// client (the proxy's stream recovery): the routable channels in the engine's order (routes, as
// Select returns them) that usable accepts, another channel than the one that broke first, and
// that one last, only if the break was not a timeout (a stalled provider must not cost a second
// stall) — the order of resort of a failover, applied to a continuation.
func Continuation(routes []health.Route, broken string, timedOut bool, usable func(id string) bool) []string {
	var out []string
	same := false
	for _, r := range routes {
		if r.Panic || !usable(r.Channel) {
			continue
		}
		if r.Channel == broken {
			same = true
			continue
		}
		out = append(out, r.Channel)
	}
	if same && !timedOut {
		out = append(out, broken)
	}
	return out
}
