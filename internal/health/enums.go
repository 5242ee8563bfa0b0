package health

import (
	"fmt"
	"strconv"
	"strings"
)

// Outcome is the class of one attempt's result, as the proxy saw it.
type Outcome uint8

const (
	OutcomeSuccess         Outcome = iota // 2xx, and a stream that completed
	OutcomeServerError                    // 5xx
	OutcomeTimeout                        // no headers, no first event, or a stream gone idle in time
	OutcomeConnectionError                // dial failures, resets, TLS errors
	OutcomeStreamCut                      // a stream that ended before completion
	OutcomeRateLimited                    // 429: a request to slow down, not a failure
	OutcomeClientError                    // any other 4xx: the caller's problem, never the channel's
	// OutcomeMisconfigured: the provider answered 404 or 405 on its own API path for a model the
	// channel declares (a baseURL or upstreamModel typo, an API the provider does not serve). It
	// is the channel's fault, tallied with the server errors; its own name tells the operator
	// where to look.
	OutcomeMisconfigured
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"success", "server_error", "timeout", "connection_error", "stream_cut", "rate_limited", "client_error", "misconfigured",
}

func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// IsFailure reports whether o counts against the channel: server errors, timeouts, connection
// errors, cut streams and misconfiguration. 429 and other 4xx never do.
func (o Outcome) IsFailure() bool {
	return o >= OutcomeServerError && o <= OutcomeStreamCut || o == OutcomeMisconfigured
}

// tallied is the outcome's column in the window's counts, which have none for client errors or
// misconfiguration: a misconfigured answer is counted as a server error.
func (o Outcome) tallied() Outcome {
	if o == OutcomeMisconfigured {
		return OutcomeServerError
	}
	return o
}

// ParseOutcome parses the access-log spelling ("success", "server_error", ...).
func ParseOutcome(s string) (Outcome, error) {
	for i, n := range outcomeNames {
		if s == n {
			return Outcome(i), nil
		}
	}
	return 0, fmt.Errorf("unknown outcome %q, want one of %s", s, strings.Join(outcomeNames[:], ", "))
}

// OutcomeFromStatus classifies an upstream HTTP status: the one classification the proxy, replay
// (for access-log lines that carry no outcome) and injected faults share. Status 0 means no
// response arrived; without more detail it is a connection error.
//
//   - 401 and 403: the provider refused the gateway's own key (revoked, expired, wrong account):
//     the channel is broken, not the request, so a server error that fails over.
//   - 404 and 405: the path is the provider's API path and the model the one the channel
//     declares, so a wrong baseURL or upstreamModel: misconfigured (a failure of the channel).
//   - 3xx: a provider API does not redirect; the proxy does not follow: a server error.
func OutcomeFromStatus(status int) Outcome {
	switch {
	case status == 0:
		return OutcomeConnectionError
	case status == 429:
		return OutcomeRateLimited
	case status >= 500, status == 401, status == 403:
		return OutcomeServerError
	case status == 404, status == 405:
		return OutcomeMisconfigured
	case status >= 400:
		return OutcomeClientError
	case status >= 300:
		return OutcomeServerError
	default:
		return OutcomeSuccess
	}
}

func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

func (o *Outcome) UnmarshalText(b []byte) error {
	v, err := ParseOutcome(string(b))
	if err == nil {
		*o = v
	}
	return err
}

// Phase is where a channel×model stands in the state machine.
type Phase uint8

const (
	PhaseHealthy     Phase = iota // full traffic
	PhaseDegraded                 // score below DegradedBelow: weight scaled by score/100
	PhaseRateLimited              // 429s: Retry-After honoured, share cut and restored gradually
	PhaseEjected                  // tripped: no traffic until the cooldown is over
	PhaseProbing                  // cooldown over: only engine-requested probes
	PhaseRampingUp                // probes passed: a growing share of real traffic
	PhaseDisabled                 // operator override: no traffic, not even in panic
	numPhases
)

var phaseNames = [numPhases]string{"Healthy", "Degraded", "RateLimited", "Ejected", "Probing", "RampingUp", "Disabled"}

// phaseSeverity orders phases from best to worst; RateLimited and RampingUp still carry traffic,
// Probing is closer to service than Ejected, and Disabled wins over everything.
var phaseSeverity = [numPhases]int{
	PhaseHealthy: 0, PhaseDegraded: 1, PhaseRateLimited: 2, PhaseRampingUp: 3, PhaseProbing: 4, PhaseEjected: 5, PhaseDisabled: 6,
}

func (p Phase) String() string {
	if p < numPhases {
		return phaseNames[p]
	}
	return "Phase(" + strconv.Itoa(int(p)) + ")"
}

// Severity orders phases for "worst phase" aggregation: Healthy 0, Degraded 1, RateLimited 2,
// RampingUp 3, Probing 4, Ejected 5, Disabled 6.
func (p Phase) Severity() int {
	if p < numPhases {
		return phaseSeverity[p]
	}
	return len(phaseSeverity)
}

// OutOfRotation reports whether a verdict (the engine's or an operator's) keeps a channel×model
// out of real traffic in p: Ejected, Probing (probes only) or Disabled.
func (p Phase) OutOfRotation() bool {
	return p == PhaseEjected || p == PhaseProbing || p == PhaseDisabled
}

// ParsePhase parses the CamelCase phase name used in status and the journal.
func ParsePhase(s string) (Phase, error) {
	for i, n := range phaseNames {
		if s == n {
			return Phase(i), nil
		}
	}
	return 0, fmt.Errorf("unknown phase %q, want one of %s", s, strings.Join(phaseNames[:], ", "))
}

func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p *Phase) UnmarshalText(b []byte) error {
	v, err := ParsePhase(string(b))
	if err == nil {
		*p = v
	}
	return err
}

// Strategy orders the routable channels of a model.
type Strategy uint8

const (
	StrategyHealthScore Strategy = iota // best score first
	StrategyWeighted                    // weighted random draw for the first place
	StrategyPriority                    // candidate list order
	numStrategies
)

var strategyNames = [numStrategies]string{"HealthScore", "Weighted", "Priority"}

func (s Strategy) String() string {
	if s < numStrategies {
		return strategyNames[s]
	}
	return "Strategy(" + strconv.Itoa(int(s)) + ")"
}

// ParseStrategy parses the RoutingPolicy spelling; "" is the default, HealthScore.
func ParseStrategy(s string) (Strategy, error) {
	if s == "" {
		return StrategyHealthScore, nil
	}
	for i, n := range strategyNames {
		if s == n {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown strategy %q, want one of %s", s, strings.Join(strategyNames[:], ", "))
}

func (s Strategy) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *Strategy) UnmarshalText(b []byte) error {
	v, err := ParseStrategy(string(b))
	if err == nil {
		*s = v
	}
	return err
}
