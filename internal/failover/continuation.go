package failover

import "github.com/switchyard-io/switchyard/internal/health"

// Continuation orders the channels that may finish a stream which broke after text reached the
// client (the proxy's stream recovery): the routable channels in the engine's order (routes, as
// Select returns them) that usable accepts, those that have not failed this request first; then
// those that did (the one whose stream broke, one that failed before the stream began, a
// continuation that failed), only if none of their failures was a timeout (a stalled provider
// must not cost a second stall) — the order of resort of a failover, applied to a continuation.
// failed reports whether a channel failed this request, and whether a failure was a timeout.
func Continuation(routes []health.Route, failed func(id string) (failed, timedOut bool), usable func(id string) bool) []string {
	var out, again []string
	for _, r := range routes {
		if r.Panic || !usable(r.Channel) {
			continue
		}
		switch f, timedOut := failed(r.Channel); {
		case !f:
			out = append(out, r.Channel)
		case !timedOut:
			again = append(again, r.Channel)
		}
	}
	return append(out, again...)
}
