package routing

import (
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/health"
)

func ptr[T any](v T) *T { return &v }

func TestResolvePolicyScenarios(t *testing.T) {
	chat := health.DefaultSettings("chat")
	batch := health.DefaultSettings("batch")
	// The figures the contract and DESIGN.md promise for each scenario.
	if chat.Window != time.Minute || chat.MinRequests != 20 || chat.ErrorRatePercent != 25 || chat.ConsecutiveFailures != 5 ||
		chat.TimeoutRatePercent != 0 || chat.Cooldown != 5*time.Minute || chat.RampHold != 3*time.Minute {
		t.Fatalf("chat defaults drifted from the contract: %+v", chat)
	}
	if batch.Window != 5*time.Minute || batch.MinRequests != 50 || batch.ErrorRatePercent != 12 ||
		batch.TimeoutRatePercent == 0 || batch.Cooldown != 10*time.Minute || batch.RampHold != 5*time.Minute {
		t.Fatalf("batch defaults drifted from DESIGN.md: %+v", batch)
	}

	tests := []struct {
		name  string
		spec  v1alpha1.RoutingPolicySpec
		check func(t *testing.T, e EffectivePolicy)
	}{
		{"empty scenario is chat", v1alpha1.RoutingPolicySpec{}, func(t *testing.T, e EffectivePolicy) {
			if e.Scenario != "chat" || e.Strategy != "HealthScore" || !e.PanicRouting {
				t.Errorf("got %s/%s/%v", e.Scenario, e.Strategy, e.PanicRouting)
			}
			if e.Settings.Window != chat.Window || e.Settings.ErrorRatePercent != chat.ErrorRatePercent {
				t.Errorf("not chat defaults: %+v", e.Settings)
			}
		}},
		{"batch supplies batch defaults", v1alpha1.RoutingPolicySpec{Scenario: v1alpha1.ScenarioBatch}, func(t *testing.T, e EffectivePolicy) {
			if e.Settings.Window != batch.Window || e.Settings.MinRequests != batch.MinRequests || e.Settings.Cooldown != batch.Cooldown {
				t.Errorf("not batch defaults: %+v", e.Settings)
			}
		}},
		{"timeoutRatePercent 0 turns batch's timeout rule off", v1alpha1.RoutingPolicySpec{
			Scenario: v1alpha1.ScenarioBatch, Detection: &v1alpha1.Detection{TimeoutRatePercent: ptr(int32(0))},
		}, func(t *testing.T, e EffectivePolicy) {
			if e.Settings.TimeoutRatePercent != 0 || e.Settings.ErrorRatePercent != batch.ErrorRatePercent {
				t.Errorf("settings %+v, want batch's with timeoutRatePercent 0", e.Settings)
			}
		}},
		{"chat takes an explicit timeout rule", v1alpha1.RoutingPolicySpec{
			Detection: &v1alpha1.Detection{TimeoutRatePercent: ptr(int32(10))},
		}, func(t *testing.T, e EffectivePolicy) {
			if e.Settings.TimeoutRatePercent != 10 {
				t.Errorf("timeoutRatePercent %d, want 10", e.Settings.TimeoutRatePercent)
			}
		}},
		{"explicit field beats the scenario", v1alpha1.RoutingPolicySpec{
			Scenario:  v1alpha1.ScenarioBatch,
			Detection: &v1alpha1.Detection{Window: ptr(v1alpha1.Duration("2m")), ErrorRatePercent: ptr(int32(18)), MinRequests: ptr(int32(200))},
			Recovery:  &v1alpha1.Recovery{RampSteps: []int32{10, 100}, Probe: &v1alpha1.Probe{SuccessesRequired: ptr(int32(5))}},
			Retry:     &v1alpha1.Retry{MaxAttempts: ptr(int32(2)), Backoff: &v1alpha1.Backoff{Max: ptr(v1alpha1.Duration("500ms"))}},
			RateLimit: &v1alpha1.RateLimit{ShareReductionPercent: ptr(int32(30))},
			Strategy:  v1alpha1.StrategyPriority, PanicRouting: ptr(false),
		}, func(t *testing.T, e EffectivePolicy) {
			s := e.Settings
			if s.Window != 2*time.Minute || s.ErrorRatePercent != 18 || s.MinRequests != 200 {
				t.Errorf("explicit detection lost: %+v", s)
			}
			if s.Cooldown != batch.Cooldown || s.TimeoutRatePercent != batch.TimeoutRatePercent {
				t.Errorf("unset fields must stay batch defaults: %+v", s)
			}
			if len(s.RampSteps) != 2 || s.RampSteps[0] != 10 || s.ProbeSuccessesRequired != 5 || s.ShareReductionPercent != 30 {
				t.Errorf("recovery/rate limit overrides lost: %+v", s)
			}
			if e.Retry.MaxAttempts != 2 || e.Retry.BackoffMax != 500*time.Millisecond || e.Retry.BackoffBase != DefaultBackoffBase {
				t.Errorf("retry: %+v", e.Retry)
			}
			if e.Strategy != "Priority" || e.PanicRouting {
				t.Errorf("strategy/panic: %s %v", e.Strategy, e.PanicRouting)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ResolvePolicy(&tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, e)
		})
	}
}

func TestResolvePolicyErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec v1alpha1.RoutingPolicySpec
		want string
	}{
		{"bad duration", v1alpha1.RoutingPolicySpec{Detection: &v1alpha1.Detection{Window: ptr(v1alpha1.Duration("soon"))}}, "spec.detection.window"},
		{"zero duration", v1alpha1.RoutingPolicySpec{Recovery: &v1alpha1.Recovery{Cooldown: ptr(v1alpha1.Duration("0s"))}}, "spec.recovery.cooldown"},
		{"unknown scenario", v1alpha1.RoutingPolicySpec{Scenario: "interactive"}, "spec.scenario"},
		{"unknown strategy", v1alpha1.RoutingPolicySpec{Strategy: "RoundRobin"}, "spec.strategy"},
		{"explicit contradicts default", v1alpha1.RoutingPolicySpec{Recovery: &v1alpha1.Recovery{MaxCooldown: ptr(v1alpha1.Duration("1m"))}}, "ooldown"},
		{"explicit contradicts explicit", v1alpha1.RoutingPolicySpec{Detection: &v1alpha1.Detection{Window: ptr(v1alpha1.Duration("10s")), RecentErrorWindow: ptr(v1alpha1.Duration("30s"))}}, "recentErrorWindow"},
		{"backoff max below base", v1alpha1.RoutingPolicySpec{Retry: &v1alpha1.Retry{Backoff: &v1alpha1.Backoff{Max: ptr(v1alpha1.Duration("10ms"))}}}, "spec.retry.backoff.max"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ResolvePolicy(&tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestResolvePolicyDependentDefaultsFollowOverrides(t *testing.T) {
	e, err := ResolvePolicy(&v1alpha1.RoutingPolicySpec{
		Detection: &v1alpha1.Detection{Window: ptr(v1alpha1.Duration("10s"))},
		Recovery:  &v1alpha1.Recovery{Cooldown: ptr(v1alpha1.Duration("1h"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.Settings.RecentErrorWindow != 10*time.Second || e.Settings.MaxCooldown != time.Hour {
		t.Errorf("recentErrorWindow %s (want 10s), maxCooldown %s (want 1h)", e.Settings.RecentErrorWindow, e.Settings.MaxCooldown)
	}
}

func TestResolveTimeouts(t *testing.T) {
	got, err := ResolveTimeouts(&v1alpha1.ChannelTimeouts{Request: ptr(v1alpha1.Duration("10s"))})
	if err != nil {
		t.Fatal(err)
	}
	if got.Request != 10*time.Second || got.FallbackRequest != 10*time.Second || got.FirstByte != DefaultFirstByte {
		t.Errorf("an unset fallbackRequest must not exceed request: %+v", got)
	}
	if _, err := ResolveTimeouts(&v1alpha1.ChannelTimeouts{Request: ptr(v1alpha1.Duration("10s")), FallbackRequest: ptr(v1alpha1.Duration("20s"))}); err == nil {
		t.Error("fallbackRequest > request accepted")
	}
}
