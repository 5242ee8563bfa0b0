package failover

import (
	"hash/fnv"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Cohort is which routing a request follows while a policy is rolled out (spec.rollout).
type Cohort uint8

const (
	// CohortPolicy: the policy's failover and ejection (the engine's order, panic routing).
	CohortPolicy Cohort = iota
	// CohortListed: the listed channels in order, failing over to the next listed one on a
	// failed attempt, as a plain proxy would; ejections are ignored. Every request of a DryRun
	// policy is listed.
	CohortListed
)

// String is the cohort's label in switchyard_requests_total and the admin API.
func (c Cohort) String() string {
	if c == CohortListed {
		return "listed"
	}
	return "policy"
}

// ChooseCohort says which cohort a request of pol belongs to. key is what makes the choice
// stable: the client's X-Switchyard-Cohort header when it sent one (a session stays in one
// cohort across its requests), otherwise the request id. The share is a hash of key mod 100
// below Percent, so every replica (and replay, given the logged ids) puts a request in the same
// cohort, and raising the percent only ever moves requests from listed to policy.
func ChooseCohort(pol *routing.Policy, key string) Cohort {
	r := pol.Rollout
	switch {
	case r == nil:
		return CohortPolicy
	case r.DryRun:
		return CohortListed
	case r.Percent >= 100:
		return CohortPolicy
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	if int(h.Sum64()%100) < r.Percent {
		return CohortPolicy
	}
	return CohortListed
}

// SetCohort puts the request (after Start) in a cohort: CohortListed walks the listed channels
// in order instead of the engine's.
func (p *Plan) SetCohort(c Cohort) { p.listed = c == CohortListed }

// Cohort is the request's cohort.
func (p *Plan) Cohort() Cohort {
	if p.listed {
		return CohortListed
	}
	return CohortPolicy
}

// pickListed is pick for the listed cohort: the first candidate in policy order that this
// request has not tried, may serve it (residency, Fit) and is not disabled by an operator. The
// operator's spec.disabled is no health verdict but an order ("take it out now"), so it binds
// every cohort; ejections, ramps and rate limits do not.
func (p *Plan) pickListed(now time.Time, mr *Model) (*routing.Channel, string) {
	for _, c := range mr.Candidates {
		ch, why := p.usable(c.Channel, mr.Name)
		if ch == nil {
			if why != "" {
				p.unfit = why
			}
			continue
		}
		if st, ok := p.health.StatusOf(now, health.Key{Channel: c.Channel, Model: mr.Name}); ok && st.Phase == health.PhaseDisabled {
			continue
		}
		return ch, c.Channel
	}
	return nil, ""
}
