package proxy

import (
	"fmt"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

// attemptObserver is one effect of a finished attempt: what the health engine, the metrics, the
// client layer or the access log make of it. finishAttempt hands every attempt to the server's
// observers in their order, at one time (now, the server's clock): an observer that notes
// something on the result (the health judgement's "not counted", the client layer's estimated
// tokens) runs before the ones that show it.
type attemptObserver interface {
	finished(now time.Time, a *attempt, r *result)
}

// attemptObservers are the effects of a finished attempt, in the order they happen; made once
// (New), so an attempt allocates nothing for them.
func (s *Server) attemptObservers() []attemptObserver {
	obs := []attemptObserver{probePaths{paths: &s.apiPaths}, healthObserver{engine: s.engine}, metricsObserver{m: s.metrics}, clientObserver{}}
	if s.accessLog != nil {
		obs = append(obs, accessLogObserver{log: s.accessLog})
	}
	return obs
}

// probePaths learns the API path real traffic uses for each channel×model: probes copy it.
type probePaths struct{ paths *sync.Map }

func (o probePaths) finished(_ time.Time, a *attempt, r *result) {
	if a.probe || r.outcome != health.OutcomeSuccess {
		return
	}
	if p, ok := o.paths.Load(a.target); !ok || p.(string) != a.path {
		o.paths.Store(a.target, a.path)
	}
}

// healthObserver reports the attempt to the health engine, unless it says nothing of the channel:
// a client that went away, or a long answer's timeout on a channel that answered others meanwhile
// (noted on the result's detail).
type healthObserver struct{ engine *health.Engine }

func (o healthObserver) finished(now time.Time, a *attempt, r *result) {
	counted := !r.canceled
	if r.outcome == health.OutcomeSuccess {
		a.answered.Add(1)
	} else if r.outcome == health.OutcomeTimeout && !a.stream && !a.probe {
		// A non-streamed answer arrives whole, so one that outlives the request timeout may be
		// a hung channel or just a long answer. A channel that completed other answers meanwhile
		// is alive: the timeout is the request's length (a large max_tokens), not the channel's
		// fault, and counting it would let any client eject healthy channels with long requests.
		if n := a.answered.Load() - a.answeredBefore; n > 0 {
			counted = false
			r.detail += fmt.Sprintf(" (not counted against the channel: it completed %d other answer(s) meanwhile; for answers this long raise spec.timeouts.request or stream)", n)
		}
	}
	if counted {
		o.engine.Observe(a.target,
			health.Observation{At: now, Outcome: r.outcome, Latency: healthLatency(a.stream, r), RetryAfter: r.retryAfter, Probe: a.probe})
	}
}

// metricsObserver counts the attempts of real traffic and their durations.
type metricsObserver struct{ m *Metrics }

func (o metricsObserver) finished(_ time.Time, a *attempt, r *result) {
	if a.probe {
		return
	}
	outcome := r.outcome.String()
	if r.canceled {
		outcome = "canceled"
	}
	o.m.Attempts.WithLabelValues(a.channel.Namespace, a.channel.Name, a.channel.Provider, a.model, outcome).Inc()
	o.m.Duration.WithLabelValues(a.channel.Namespace, a.channel.Name, a.model).Observe(r.latency.Seconds())
	if r.ttft > 0 {
		o.m.TTFT.WithLabelValues(a.channel.Namespace, a.channel.Name, a.model).Observe(r.ttft.Seconds())
	}
}

// clientObserver records the attempt in the client layer's call (usage, audit), and the tokens
// of a stream the client abandoned, as estimates (noted on the result for the access log).
type clientObserver struct{}

func (clientObserver) finished(_ time.Time, a *attempt, r *result) {
	a.call.attempt(a, r)
	if !r.canceled {
		return
	}
	if p, c := abandonedTokens(a); p+c > 0 {
		a.call.add(int64(p), int64(c), true)
		r.estimated = accessTokens{Prompt: p, Completion: c}
	}
}

// accessLogObserver writes the attempt's access-log line.
type accessLogObserver struct{ log *accessLog }

func (o accessLogObserver) finished(now time.Time, a *attempt, r *result) {
	line := &accessLogLine{TS: now.UTC(), RequestID: a.requestID, Channel: a.target.Channel, Model: a.model, Attempt: a.number,
		Status: r.status, Outcome: r.outcome.String(), LatencyMs: r.latency.Milliseconds(), TTFTMs: ttftMs(r.ttft),
		Stream: a.stream, Probe: a.probe, PII: a.piiMasked, Continuation: a.continuation}
	if r.estimated != (accessTokens{}) {
		est := r.estimated
		line.Estimated, line.Tokens = true, &est
	}
	if !a.probe && a.requested != a.model {
		line.RequestedModel = a.requested
	}
	if !a.probe {
		line.CohortKey = cohortHeader(a.header)
	}
	if r.outcome != health.OutcomeSuccess {
		line.Error = r.detail
		line.ErrorCode = r.errCode
		line.RetryAfterMs = r.retryAfter.Milliseconds()
	}
	o.log.write(line)
}
