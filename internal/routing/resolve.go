package routing

import (
	"errors"
	"fmt"
	"time"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/health"
)

// Defaults that do not depend on the scenario.
const (
	DefaultWeight          = 100
	DefaultRequestTimeout  = 30 * time.Second
	DefaultFallbackTimeout = 20 * time.Second
	DefaultFirstByte       = 10 * time.Second
	DefaultStreamIdle      = 10 * time.Second
	DefaultMaxAttempts     = 3
	DefaultBudgetPercent   = 20
	DefaultBackoffBase     = 100 * time.Millisecond
	DefaultBackoffMax      = 2 * time.Second
	// DefaultMaxContinuations bounds a broken stream's continuation attempts per request.
	DefaultMaxContinuations = 2
)

// EffectivePolicy is a RoutingPolicy's settings with every unset field filled in.
type EffectivePolicy struct {
	Scenario     string
	Strategy     string
	Settings     health.Settings
	Retry        Retry
	PanicRouting bool
	// StreamRecovery ("Continue" or "Error") and MaxContinuations: what a broken stream becomes.
	StreamRecovery   string
	MaxContinuations int
}

// ResolvePolicy resolves a RoutingPolicy spec into its effective settings: an explicit field wins,
// otherwise the scenario's default (chat when unset). Scenario defaults live here and not in the
// CRD because they depend on another field. The result is validated as a whole, because an
// explicit field can contradict a scenario default (ejectBelow 60 under chat's degradedBelow 50).
func ResolvePolicy(spec *v1alpha1.RoutingPolicySpec) (EffectivePolicy, error) {
	scenario := string(spec.Scenario)
	if scenario == "" {
		scenario = string(v1alpha1.ScenarioChat)
	}
	if scenario != string(v1alpha1.ScenarioChat) && scenario != string(v1alpha1.ScenarioBatch) {
		return EffectivePolicy{}, fmt.Errorf("spec.scenario: unsupported value %q: supported values: \"chat\", \"batch\"", scenario)
	}
	strategy := string(spec.Strategy)
	if strategy == "" {
		strategy = string(v1alpha1.StrategyHealthScore)
	}
	if _, err := health.ParseStrategy(strategy); err != nil {
		return EffectivePolicy{}, fmt.Errorf("spec.strategy: %w", err)
	}

	s := health.DefaultSettings(scenario)
	r := resolver{}
	if d := spec.Detection; d != nil {
		r.duration(&s.Window, d.Window, "spec.detection.window")
		r.int(&s.MinRequests, d.MinRequests)
		r.int(&s.ErrorRatePercent, d.ErrorRatePercent)
		r.int(&s.ConsecutiveFailures, d.ConsecutiveFailures)
		r.int(&s.TimeoutRatePercent, d.TimeoutRatePercent)
		r.duration(&s.LatencyP95, d.LatencyP95, "spec.detection.latencyP95")
		r.duration(&s.RecentErrorWindow, d.RecentErrorWindow, "spec.detection.recentErrorWindow")
	}
	if h := spec.HealthScore; h != nil {
		r.int(&s.ErrorWeightPercent, h.ErrorWeightPercent)
		r.int(&s.DegradedBelow, h.DegradedBelow)
		r.int(&s.EjectBelow, h.EjectBelow)
		r.duration(&s.EjectAfter, h.EjectAfter, "spec.healthScore.ejectAfter")
	}
	if rc := spec.Recovery; rc != nil {
		r.duration(&s.Cooldown, rc.Cooldown, "spec.recovery.cooldown")
		r.duration(&s.MaxCooldown, rc.MaxCooldown, "spec.recovery.maxCooldown")
		if p := rc.Probe; p != nil {
			r.duration(&s.ProbeInterval, p.Interval, "spec.recovery.probe.interval")
			r.int(&s.ProbeSuccessesRequired, p.SuccessesRequired)
			r.duration(&s.ProbeMaxLatency, p.MaxLatency, "spec.recovery.probe.maxLatency")
		}
		if len(rc.RampSteps) > 0 {
			s.RampSteps = make([]int, len(rc.RampSteps))
			for i, v := range rc.RampSteps {
				s.RampSteps[i] = int(v)
			}
		}
		r.duration(&s.RampHold, rc.RampHold, "spec.recovery.rampHold")
	}
	// Defaults that depend on an explicit field follow it, so one override never makes the
	// remaining defaults contradict it (window 10s with chat's 30s recent-error window, say).
	if spec.Detection == nil || spec.Detection.RecentErrorWindow == nil {
		s.RecentErrorWindow = min(s.RecentErrorWindow, s.Window)
	}
	if spec.Recovery == nil || spec.Recovery.MaxCooldown == nil {
		s.MaxCooldown = max(s.MaxCooldown, s.Cooldown)
	}
	if rl := spec.RateLimit; rl != nil {
		r.duration(&s.MaxRetryAfterWait, rl.MaxRetryAfterWait, "spec.rateLimit.maxRetryAfterWait")
		r.int(&s.ShareReductionPercent, rl.ShareReductionPercent)
	}

	retry := Retry{
		MaxAttempts:   DefaultMaxAttempts,
		BudgetPercent: DefaultBudgetPercent,
		BackoffBase:   DefaultBackoffBase,
		BackoffMax:    DefaultBackoffMax,
	}
	if rt := spec.Retry; rt != nil {
		r.int(&retry.MaxAttempts, rt.MaxAttempts)
		r.int(&retry.BudgetPercent, rt.BudgetPercent)
		if b := rt.Backoff; b != nil {
			r.duration(&retry.BackoffBase, b.Base, "spec.retry.backoff.base")
			r.duration(&retry.BackoffMax, b.Max, "spec.retry.backoff.max")
		}
	}
	if r.err != nil {
		return EffectivePolicy{}, r.err
	}
	if err := s.Validate(); err != nil {
		return EffectivePolicy{}, fmt.Errorf("effective settings (scenario %s): %w", scenario, err)
	}
	if retry.MaxAttempts < 1 {
		return EffectivePolicy{}, errors.New("spec.retry.maxAttempts: must be at least 1")
	}
	if retry.BackoffMax < retry.BackoffBase {
		return EffectivePolicy{}, errors.New("spec.retry.backoff.max: must be at least base")
	}
	recovery := string(v1alpha1.StreamRecoveryContinue) // both scenarios: an answer finished beats one lost
	if spec.StreamRecovery != "" {
		recovery = string(spec.StreamRecovery)
	}
	if recovery != string(v1alpha1.StreamRecoveryContinue) && recovery != string(v1alpha1.StreamRecoveryError) {
		return EffectivePolicy{}, fmt.Errorf("spec.streamRecovery: unsupported value %q: supported values: \"Continue\", \"Error\"", recovery)
	}
	maxCont := DefaultMaxContinuations
	if spec.MaxContinuations != nil {
		if maxCont = int(*spec.MaxContinuations); maxCont < 0 {
			return EffectivePolicy{}, errors.New("spec.maxContinuations: must not be negative")
		}
	}
	if recovery == string(v1alpha1.StreamRecoveryError) {
		maxCont = 0
	}
	return EffectivePolicy{
		StreamRecovery:   recovery,
		MaxContinuations: maxCont,
		Scenario:         scenario,
		Strategy:         strategy,
		Settings:         s,
		Retry:            retry,
		PanicRouting:     spec.PanicRouting == nil || *spec.PanicRouting,
	}, nil
}

// ResolveTimeouts fills a channel's unset timeouts. An unset fallbackRequest never exceeds request.
func ResolveTimeouts(t *v1alpha1.ChannelTimeouts) (Timeouts, error) {
	out := Timeouts{
		Request:         DefaultRequestTimeout,
		FallbackRequest: DefaultFallbackTimeout,
		FirstByte:       DefaultFirstByte,
		StreamIdle:      DefaultStreamIdle,
	}
	if t == nil {
		return out, nil
	}
	r := resolver{}
	r.duration(&out.Request, t.Request, "spec.timeouts.request")
	r.duration(&out.FirstByte, t.FirstByte, "spec.timeouts.firstByte")
	r.duration(&out.StreamIdle, t.StreamIdle, "spec.timeouts.streamIdle")
	if t.FallbackRequest != nil {
		r.duration(&out.FallbackRequest, t.FallbackRequest, "spec.timeouts.fallbackRequest")
	} else {
		out.FallbackRequest = min(out.FallbackRequest, out.Request)
	}
	if r.err != nil {
		return Timeouts{}, r.err
	}
	if out.FallbackRequest > out.Request {
		return Timeouts{}, fmt.Errorf("spec.timeouts.fallbackRequest: %s must not exceed request %s", out.FallbackRequest, out.Request)
	}
	return out, nil
}

// resolver overlays optional API fields, keeping the first parse error. Standalone manifests do
// not pass through the API server's validation, so durations are checked here too.
type resolver struct{ err error }

func (r *resolver) duration(dst *time.Duration, v *v1alpha1.Duration, field string) {
	if v == nil || r.err != nil {
		return
	}
	d, err := v.Get()
	if err != nil {
		r.err = fmt.Errorf("%s: invalid duration %q", field, string(*v))
		return
	}
	if d <= 0 {
		r.err = fmt.Errorf("%s: must be a positive duration, got %q", field, string(*v))
		return
	}
	*dst = d
}

func (r *resolver) int(dst *int, v *int32) {
	if v != nil {
		*dst = int(*v)
	}
}
