package proxy

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// CohortHeader is the request header a client sets to keep a session in one rollout cohort:
// its value, not the request id, is hashed (failover.ChooseCohort).
const CohortHeader = "X-Switchyard-Cohort"

// cohortKey is what decides the request's cohort: the client's X-Switchyard-Cohort when it is a
// plausible id (bounded, printable), otherwise the request id.
func (rt *routeState) cohortKey() string {
	if v := cohortHeader(rt.header); v != "" {
		return v
	}
	return rt.requestID
}

// cohortHeader is the client's X-Switchyard-Cohort if it may decide the cohort, else "". The
// access log carries it (cohortKey) so that replay hashes what the proxy hashed.
func cohortHeader(h http.Header) string {
	if v := h.Get(CohortHeader); validRequestID(v) {
		return v
	}
	return ""
}

// rolloutStats are one policy's figures per cohort since the proxy started: plain sums, so that
// the controller can add up the replicas' and divide once.
type rolloutStats struct {
	form    routing.Rollout // the rollout the figures were counted under
	cohorts [2]cohortStats
}

type cohortStats struct {
	requests, successes atomic.Int64
	latencyNanos        atomic.Int64 // sum over requests, answered or not
}

// recordCohort counts one finished request of a policy being rolled out. Requests the client
// gave up on are left out: their latency is the client's, and they are neither success nor failure.
func (s *Server) recordCohort(p *routing.Policy, c failover.Cohort, outcome string, took time.Duration) {
	if outcome == "canceled" || outcome == "client_error" {
		return
	}
	key := p.Namespace + "/" + p.Name
	v, ok := s.rollouts.Load(key)
	if !ok || v.(*rolloutStats).form != *p.Rollout {
		// A new rollout, or another percent or mode: figures counted under the old one would
		// blur the comparison, so they start again (a race here loses a count or two, no more).
		nv := &rolloutStats{form: *p.Rollout}
		if ok {
			s.rollouts.CompareAndSwap(key, v, nv)
		} else {
			s.rollouts.LoadOrStore(key, nv)
		}
		v, _ = s.rollouts.Load(key)
	}
	cs := &v.(*rolloutStats).cohorts[c]
	cs.requests.Add(1)
	if outcome == "success" {
		cs.successes.Add(1)
	}
	cs.latencyNanos.Add(int64(took))
}

// rolloutsState lists the served policies with a rollout and their cohorts' figures.
func (s *Server) rolloutsState(c *config) []adminapi.RolloutState {
	if c == nil {
		return nil
	}
	var out []adminapi.RolloutState
	for i := range c.table.Policies {
		p := &c.table.Policies[i]
		if p.Rollout == nil {
			continue
		}
		rs := adminapi.RolloutState{Name: p.Namespace + "/" + p.Name, Percent: p.Rollout.Percent, DryRun: p.Rollout.DryRun}
		if v, ok := s.rollouts.Load(rs.Name); ok && v.(*rolloutStats).form == *p.Rollout {
			st := &v.(*rolloutStats).cohorts
			rs.Policy = counts(&st[failover.CohortPolicy])
			rs.Listed = counts(&st[failover.CohortListed])
		}
		out = append(out, rs)
	}
	return out
}

func counts(cs *cohortStats) adminapi.CohortCounts {
	return adminapi.CohortCounts{Requests: cs.requests.Load(), Successes: cs.successes.Load(), LatencyNanos: cs.latencyNanos.Load()}
}
