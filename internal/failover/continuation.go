package failover

import (
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

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

// ContinueInput is what the continuation of a broken stream is decided on, beside the plan.
type ContinueInput struct {
	Now   time.Time
	Model *Model  // the model whose stream broke
	Draw  float64 // the draw Select orders weighted channels by
	// Failed reports whether a channel failed this request, and whether a failure was a timeout.
	Failed func(id string) (failed, timedOut bool)
	// PassOver names channels not to ask again for this answer (they refused the prefill, or
	// wrote another answer); nil: none.
	PassOver map[string]bool
	// SpliceOK: the request may be sent again whole and its answer spliced at the text already
	// sent (nothing was sent yet, or the request is deterministic).
	SpliceOK bool
}

// Continue is the planner's decision of the channel that finishes a stream which broke after
// text reached the client: among the routable channels (the health engine's order, no panic
// routing), within the first policy's requireResidency and fit for the request, one whose model
// takes a prefill (capabilities.prefill), in Continuation's order; else, when SpliceOK, any of
// them, with splice true. nil when none may. The plan must have been started (its first model,
// fit and residency are the request's); it is not changed.
func (p *Plan) Continue(in ContinueInput) (ch *routing.Channel, splice bool) {
	routes := p.health.Select(in.Now, in.Model.Name, in.Model.Candidates, in.Model.Strategy, false, in.Draw, nil)
	usable := func(id string, prefill bool) bool {
		c := p.routes.Channel(id)
		if c == nil || !p.resident(c) || p.fit != nil && p.fit.Unfit(c, in.Model.Name) != "" {
			return false
		}
		m, ok := c.Model(in.Model.Name)
		return ok && (!prefill || m.Capabilities.Prefill && !in.PassOver[id])
	}
	if order := Continuation(routes, in.Failed, func(id string) bool { return usable(id, true) }); len(order) > 0 {
		return p.routes.Channel(order[0]), false
	}
	if !in.SpliceOK {
		return nil, false
	}
	if order := Continuation(routes, in.Failed, func(id string) bool { return usable(id, false) }); len(order) > 0 {
		return p.routes.Channel(order[0]), true
	}
	return nil, false
}
