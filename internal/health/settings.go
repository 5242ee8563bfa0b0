package health

import (
	"errors"
	"fmt"
	"time"
)

// Settings are the detection, score, recovery and rate-limit numbers of one channel×model,
// as a RoutingPolicy resolves them (scenario profile first, then the policy's overrides).
// Percentages are integers 0-100. For ErrorRatePercent, TimeoutRatePercent,
// ConsecutiveFailures, LatencyP95 and EjectBelow, zero turns that trip rule off.
type Settings struct {
	// Window is the sliding window for rates and p95 (chat 60s, batch 5m).
	Window time.Duration
	// RecentErrorWindow is the fast error signal folded into the score (chat 30s, batch 60s);
	// at most Window.
	RecentErrorWindow time.Duration
	// LatencyP95 ejects when the window's p95 exceeds it, with MinRequests (chat 20s, batch 120s).
	LatencyP95 time.Duration

	// MinRequests: no rate- or p95-based verdict below this many requests in the window
	// (chat 20, batch 50). At least 1.
	MinRequests int
	// ErrorRatePercent ejects at or above this failure share (chat 25, batch 12).
	ErrorRatePercent int
	// ConsecutiveFailures ejects after this many failures in a row, at any volume (chat 5, batch 10).
	ConsecutiveFailures int
	// TimeoutRatePercent ejects when timeouts alone reach this share, with MinRequests (chat 0: off,
	// batch 8). Chat has no timeout limit of its own: a timeout is a failure, so the error rate and
	// the consecutive rule catch a channel that hangs, while four timeouts in forty requests (a
	// network blip, four in a row or spread out) are noise that must not eject. Batch keeps one,
	// below its error rate, because timeouts clog its queue.
	TimeoutRatePercent int

	// ErrorWeightPercent is the error penalty's share of the score; latency weighs the rest (70).
	ErrorWeightPercent int
	// DegradedBelow: below this score the phase is Degraded and the weight is scaled by score/100 (50).
	DegradedBelow int
	// EjectBelow: a score below this continuously for EjectAfter ejects (30).
	EjectBelow int
	// EjectAfter (chat 3m, batch 5m).
	EjectAfter time.Duration

	// Cooldown after the first ejection; doubles on each repeat up to MaxCooldown
	// (chat 5m/30m, batch 10m/60m).
	Cooldown, MaxCooldown time.Duration
	// ProbeInterval is the least time between two probes of one key (chat 10s, batch 30s).
	ProbeInterval time.Duration
	// ProbeMaxLatency: a slower probe success is a failed probe (chat 10s, batch 60s).
	ProbeMaxLatency time.Duration
	// RampHold is the time at each ramp step (chat 3m, batch 5m).
	RampHold time.Duration
	// ProbeSuccessesRequired in a row before the ramp starts (3).
	ProbeSuccessesRequired int
	// RampSteps are traffic shares in percent, strictly increasing, ending at 100 ([5 15 50 100]).
	RampSteps []int

	// MaxRetryAfterWait is for the proxy: a 429 whose Retry-After is at most this is waited out on
	// the same channel, a longer one fails over (chat 3s, batch 10s). The engine honours every
	// Retry-After either way.
	MaxRetryAfterWait time.Duration
	// ShareReductionPercent cuts the traffic share on each 429 burst (50).
	ShareReductionPercent int
}

// DefaultSettings returns the profile of a RoutingPolicy scenario: "chat" (also for "" and any
// unknown name; the policy compiler rejects unknown names before they get here) or "batch".
func DefaultSettings(scenario string) Settings {
	if scenario == "batch" {
		return Settings{
			Window: 5 * time.Minute, RecentErrorWindow: 60 * time.Second, LatencyP95: 120 * time.Second,
			MinRequests: 50, ErrorRatePercent: 12, ConsecutiveFailures: 10, TimeoutRatePercent: 8,
			ErrorWeightPercent: 70, DegradedBelow: 50, EjectBelow: 30, EjectAfter: 5 * time.Minute,
			Cooldown: 10 * time.Minute, MaxCooldown: 60 * time.Minute,
			ProbeInterval: 30 * time.Second, ProbeMaxLatency: 60 * time.Second, ProbeSuccessesRequired: 3,
			RampSteps: []int{5, 15, 50, 100}, RampHold: 5 * time.Minute,
			MaxRetryAfterWait: 10 * time.Second, ShareReductionPercent: 50,
		}
	}
	return Settings{
		Window: 60 * time.Second, RecentErrorWindow: 30 * time.Second, LatencyP95: 20 * time.Second,
		MinRequests: 20, ErrorRatePercent: 25, ConsecutiveFailures: 5, TimeoutRatePercent: 0,
		ErrorWeightPercent: 70, DegradedBelow: 50, EjectBelow: 30, EjectAfter: 3 * time.Minute,
		Cooldown: 5 * time.Minute, MaxCooldown: 30 * time.Minute,
		ProbeInterval: 10 * time.Second, ProbeMaxLatency: 10 * time.Second, ProbeSuccessesRequired: 3,
		RampSteps: []int{5, 15, 50, 100}, RampHold: 3 * time.Minute,
		MaxRetryAfterWait: 3 * time.Second, ShareReductionPercent: 50,
	}
}

// Validate reports every setting the engine cannot run on, joined into one error.
func (s Settings) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if s.Window < time.Second {
		bad("window must be at least 1s, got %s", s.Window)
	}
	if s.RecentErrorWindow <= 0 || s.RecentErrorWindow > s.Window {
		bad("recentErrorWindow must be in (0, window=%s], got %s", s.Window, s.RecentErrorWindow)
	}
	if s.LatencyP95 < 0 {
		bad("latencyP95 must not be negative, got %s", s.LatencyP95)
	}
	if s.MinRequests < 1 {
		bad("minRequests must be at least 1, got %d", s.MinRequests)
	}
	for _, p := range []struct {
		name string
		v    int
	}{
		{"errorRatePercent", s.ErrorRatePercent}, {"timeoutRatePercent", s.TimeoutRatePercent},
		{"errorWeightPercent", s.ErrorWeightPercent}, {"degradedBelow", s.DegradedBelow},
		{"ejectBelow", s.EjectBelow}, {"shareReductionPercent", s.ShareReductionPercent},
	} {
		if p.v < 0 || p.v > 100 {
			bad("%s must be in [0, 100], got %d", p.name, p.v)
		}
	}
	if s.ConsecutiveFailures < 0 {
		bad("consecutiveFailures must not be negative, got %d", s.ConsecutiveFailures)
	}
	if s.EjectBelow > s.DegradedBelow {
		bad("ejectBelow (%d) must not exceed degradedBelow (%d)", s.EjectBelow, s.DegradedBelow)
	}
	if s.EjectAfter < 0 {
		bad("ejectAfter must not be negative, got %s", s.EjectAfter)
	}
	if s.Cooldown <= 0 {
		bad("cooldown must be positive, got %s", s.Cooldown)
	}
	if s.MaxCooldown < s.Cooldown {
		bad("maxCooldown (%s) must be at least cooldown (%s)", s.MaxCooldown, s.Cooldown)
	}
	if s.ProbeInterval <= 0 {
		bad("probe interval must be positive, got %s", s.ProbeInterval)
	}
	if s.ProbeMaxLatency <= 0 {
		bad("probe maxLatency must be positive, got %s", s.ProbeMaxLatency)
	}
	if s.ProbeSuccessesRequired < 1 {
		bad("probe successesRequired must be at least 1, got %d", s.ProbeSuccessesRequired)
	}
	if s.RampHold <= 0 {
		bad("rampHold must be positive, got %s", s.RampHold)
	}
	if len(s.RampSteps) == 0 || s.RampSteps[len(s.RampSteps)-1] != 100 {
		bad("rampSteps must end at 100, got %v", s.RampSteps)
	}
	for i, v := range s.RampSteps {
		if v < 1 || v > 100 || (i > 0 && v <= s.RampSteps[i-1]) {
			bad("rampSteps must be strictly increasing values in [1, 100], got %v", s.RampSteps)
			break
		}
	}
	if s.MaxRetryAfterWait < 0 {
		bad("maxRetryAfterWait must not be negative, got %s", s.MaxRetryAfterWait)
	}
	return errors.Join(errs...)
}
