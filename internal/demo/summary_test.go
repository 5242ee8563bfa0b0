package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func testTable() *routing.Table {
	st := health.DefaultSettings("chat")
	st.Window, st.MinRequests, st.Cooldown, st.MaxCooldown = 10*time.Second, 10, 10*time.Second, 40*time.Second
	st.ProbeInterval, st.ProbeMaxLatency, st.RampHold = 2*time.Second, time.Second, 8*time.Second
	return &routing.Table{
		Channels: []routing.Channel{{Name: "provider-a"}, {Name: "provider-b"}},
		Policies: []routing.Policy{
			{Name: "chat", Models: []string{"gpt-4o"}, Settings: st,
				Channels: []routing.PolicyChannel{{Channel: "provider-a", Weight: 100}, {Channel: "provider-b", Weight: 100}}},
			{Name: "chat-mini", Models: []string{"gpt-4o-mini"}, Settings: st,
				Channels: []routing.PolicyChannel{{Channel: "provider-a", Weight: 100}, {Channel: "provider-b", Weight: 100}}},
		},
	}
}

func ev(sec float64, channel, model, from, to, reason, msg string) adminapi.Event {
	return adminapi.Event{Time: at(sec), Channel: channel, Model: model, From: from, To: to, Reason: reason, Message: msg, Actor: "rule"}
}

// journal is a complete story for gpt-4o on provider-a: fail at 20s, recover at 60s.
func journal() []adminapi.Event {
	a := "provider-a"
	return []adminapi.Event{
		ev(20.4, a, "gpt-4o", "Healthy", "Ejected", "ConsecutiveFailures", "5 consecutive failures (last: server_error)"),
		ev(30.4, a, "gpt-4o", "Ejected", "Probing", "CooldownElapsed", "cooldown of 10s elapsed"),
		ev(30.5, a, "gpt-4o", "Probing", "Ejected", "ProbeFailed", "probe failed: server_error"),
		ev(40.5, a, "gpt-4o", "Ejected", "Probing", "CooldownElapsed", "cooldown of 10s elapsed"),
		ev(40.6, a, "gpt-4o", "Probing", "Ejected", "ProbeFailed", "probe failed: server_error"),
		ev(50.6, a, "gpt-4o", "Ejected", "Probing", "CooldownElapsed", "cooldown of 10s elapsed"),
		ev(50.7, a, "gpt-4o", "Probing", "Ejected", "ProbeFailed", "probe failed: server_error"),
		ev(60.7, a, "gpt-4o", "Ejected", "Probing", "CooldownElapsed", "cooldown of 10s elapsed"),
		ev(64.8, a, "gpt-4o", "Probing", "RampingUp", "ProbesPassed", "3 probes in a row succeeded within 1s; traffic share 5%"),
		// A relapse in the ramp restarts the ramp: only the completed one counts.
		ev(66.0, a, "gpt-4o", "RampingUp", "Ejected", "RampErrorRise", "1/3 failures"),
		ev(86.0, a, "gpt-4o", "Ejected", "Probing", "CooldownElapsed", "cooldown of 20s elapsed"),
		ev(90.0, a, "gpt-4o", "Probing", "RampingUp", "ProbesPassed", "traffic share 5%"),
		ev(98.0, a, "gpt-4o", "RampingUp", "RampingUp", "RampStep", "5% -> 15%"),
		ev(106.0, a, "gpt-4o", "RampingUp", "RampingUp", "RampStep", "15% -> 50%"),
		ev(114.0, a, "gpt-4o", "RampingUp", "RampingUp", "RampStep", "50% -> 100%"),
		ev(122.0, a, "gpt-4o", "RampingUp", "Healthy", "RampCompleted", "held 100% for 8s"),
	}
}

func testMarks() marks {
	return marks{
		Start: t0, End: at(126), Channel: "provider-a", Models: []string{"gpt-4o"},
		FailMode:  map[string]string{"gpt-4o": "answers HTTP 503"},
		FailAt:    map[string]time.Time{"gpt-4o": at(20)},
		RecoverAt: map[string]time.Time{"gpt-4o": at(60)},
	}
}

func testMetrics(t *testing.T) Metrics {
	t.Helper()
	m, err := ParseMetrics(strings.NewReader(`
switchyard_requests_total{model="gpt-4o",outcome="success"} 3
switchyard_requests_total{model="gpt-4o",outcome="unavailable"} 1
switchyard_requests_total{model="unknown",outcome="model_not_found"} 5
switchyard_failovers_total{from_channel="provider-a",model="gpt-4o",reason="server_error",to_channel="provider-b"} 2
switchyard_ejections_total{channel="provider-a",model="gpt-4o",reason="ConsecutiveFailures"} 1
switchyard_ejections_total{channel="provider-a",model="gpt-4o",reason="RampErrorRise"} 1
switchyard_ejections_total{channel="provider-a",model="gpt-4o",reason="ProbeFailed"} 3
switchyard_upstream_attempts_total{channel="provider-a",model="gpt-4o",outcome="success",provider="openai"} 300
switchyard_upstream_attempts_total{channel="provider-a",model="gpt-4o",outcome="server_error",provider="openai"} 5
switchyard_upstream_attempts_total{channel="provider-a",model="gpt-4o",outcome="canceled",provider="openai"} 1
switchyard_upstream_attempts_total{channel="provider-b",model="gpt-4o",outcome="timeout",provider="azure-openai"} 7
`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testSeries: provider-a's gpt-4o attempts, polled each second; they grow until 20.5 s.
func testSeries() map[string][]countPoint {
	var ps []countPoint
	for i := 0; i <= 30; i++ {
		ps = append(ps, countPoint{At: at(float64(i) + 0.5), Value: float64(10 * min(i, 20))})
	}
	return map[string][]countPoint{"gpt-4o": ps}
}

func TestQuietBefore(t *testing.T) {
	series := testSeries()["gpt-4o"]
	for _, tc := range []struct {
		from, until float64
		quiet       bool
		to          time.Duration
	}{
		{20, 29, true, 500 * time.Millisecond}, // last growth seen at the 20.5 s poll
		{20, 20.4, false, 0},                   // no poll in between
		{10, 15, false, 0},                     // still growing at the end
		{25, 29, false, 0},                     // no growth at all in the interval
	} {
		q, d := quietBefore(series, at(tc.from), at(tc.until))
		if q != tc.quiet || d != tc.to {
			t.Errorf("quietBefore(%v, %v) = %v %v, want %v %v", tc.from, tc.until, q, d, tc.quiet, tc.to)
		}
	}
	if q, _ := quietBefore(nil, at(0), at(10)); q {
		t.Error("no series: quiet")
	}
}

func testResults() []outcome {
	return []outcome{
		{At: at(1), Model: "gpt-4o", OK: true, Kind: "ok", Attempts: 1, Latency: 100 * time.Millisecond},
		{At: at(21), Model: "gpt-4o", OK: true, Kind: "ok", Attempts: 2, Latency: 300 * time.Millisecond, Stream: true},
		{At: at(22), Model: "gpt-4o", OK: true, Kind: "ok", Attempts: 2, Latency: 1200 * time.Millisecond},
		{At: at(23), Model: "gpt-4o", Kind: "http_503", Attempts: 0, Latency: 50 * time.Millisecond},
	}
}

func TestSummarizeTheStory(t *testing.T) {
	final := []adminapi.ChannelState{{Channel: "provider-a", Model: "gpt-4o", Phase: "Healthy", TrafficPercent: 100}}
	s := summarize(journal(), testMarks(), testMetrics(t), testResults(), testTable(), final, testSeries())

	// The one 503 a client saw makes the story false, and is the only problem.
	if len(s.Problems) != 1 || !strings.Contains(s.Problems[0], "1 client requests failed (http_503 1)") {
		t.Fatalf("problems: %v, want the client's 503 alone", s.Problems)
	}
	if s.ProxyTotal != 4 || s.ProxySuccess != 3 {
		t.Errorf("proxy requests %v/%v, want 3/4 (the unknown model is not the demo's)", s.ProxySuccess, s.ProxyTotal)
	}
	if s.Gen.Sent != 4 || s.Gen.OK != 3 || s.Gen.FailedOver != 2 || s.Gen.ErrorKinds["http_503"] != 1 {
		t.Errorf("generator = %+v", s.Gen)
	}
	if s.Failovers != 2 {
		t.Errorf("failovers = %v", s.Failovers)
	}
	if s.LatP50 != 100*time.Millisecond || s.LatMax != 1200*time.Millisecond {
		t.Errorf("latency p50 %v max %v", s.LatP50, s.LatMax)
	}
	if s.Incident != 40*time.Second {
		t.Errorf("incident = %v", s.Incident)
	}
	if s.EjectionsMetric != 5 || s.EjectionsMetricProbe != 3 {
		t.Errorf("ejections metric %v (probe %v), want 5 (3)", s.EjectionsMetric, s.EjectionsMetricProbe)
	}
	if len(s.Ejections) != 2 || s.Ejections[0].Value != 1 {
		t.Errorf("rule ejections from the journal = %v, want ConsecutiveFailures and RampErrorRise", s.Ejections)
	}
	if len(s.Keys) != 1 {
		t.Fatalf("keys = %+v", s.Keys)
	}
	k := s.Keys[0]
	want := keyStory{Model: "gpt-4o", Mode: "answers HTTP 503", Ejected: true, ToEjection: 400 * time.Millisecond,
		Rule: "ConsecutiveFailures", Message: "5 consecutive failures (last: server_error)", Ejections: 2, ProbeFailures: 3, FailedAttempts: 5,
		Recovered: true, Ramp: true, ToRamp: 30 * time.Second, Full: true, ToFull: 54 * time.Second,
		Healthy: true, ToHealthy: 62 * time.Second, FinalPhase: "Healthy"}
	if k != want {
		t.Errorf("story\n got %+v\nwant %+v", k, want)
	}
	if len(s.Notes) != 0 {
		t.Errorf("notes: %v", s.Notes)
	}

	var b bytes.Buffer
	s.render(&b)
	out := b.String()
	for _, w := range []string{
		"Client success rate  75.00% (3/4",
		"75.00% (3/4, 1 streamed; agrees) — http_503 1",
		"first failure → ejection   0.40s   by ConsecutiveFailures: 5 consecutive failures (last: server_error)",
		"recovery → full traffic    62.00s (RampCompleted, Healthy); probes passed at 30.00s, 100% share at 54.00s",
		"eject on error rate ≥ 25% with ≥ 10 requests in 10s or 5 consecutive failures",
		"ramp 5→15→50→100% holding 8s per step",
		"Result: the story did NOT happen:\n  - 1 client requests failed (http_503 1)",
		"5 failed client attempt(s) on it, 2 ejection(s), 3 failed probe(s)",
		"switchyard_ejections_total 5, of which 3 with reason ProbeFailed",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("summary lacks %q:\n%s", w, out)
		}
	}
}

func TestSummarizeWhenTheStoryDidNotHappen(t *testing.T) {
	tbl := testTable()
	met := testMetrics(t)

	t.Run("no ejection", func(t *testing.T) {
		s := summarize(nil, testMarks(), met, nil, tbl, nil, nil)
		if len(s.Problems) != 1 || !strings.Contains(s.Problems[0], "never ejected") {
			t.Errorf("problems = %v", s.Problems)
		}
	})
	t.Run("not back to healthy", func(t *testing.T) {
		evs := journal()[:9] // up to ProbesPassed
		final := []adminapi.ChannelState{{Channel: "provider-a", Model: "gpt-4o", Phase: "RampingUp", TrafficPercent: 5}}
		s := summarize(evs, testMarks(), met, nil, tbl, final, nil)
		if len(s.Problems) != 1 || !strings.Contains(s.Problems[0], "did not come back to Healthy") || !strings.Contains(s.Problems[0], "RampingUp") {
			t.Errorf("problems = %v", s.Problems)
		}
		if k := s.Keys[0]; !k.Ramp || k.ToRamp != 4800*time.Millisecond || k.Healthy || k.Full {
			t.Errorf("story = %+v", k)
		}
		var b bytes.Buffer
		s.render(&b)
		if !strings.Contains(b.String(), "did NOT happen") {
			t.Errorf("render:\n%s", b.String())
		}
	})
	t.Run("completed but degraded again", func(t *testing.T) {
		final := []adminapi.ChannelState{{Channel: "provider-a", Model: "gpt-4o", Phase: "Degraded", TrafficPercent: 40}}
		s := summarize(journal(), testMarks(), met, nil, tbl, final, nil)
		if len(s.Problems) != 1 {
			t.Errorf("problems = %v", s.Problems)
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		mk := testMarks()
		mk.Interrupted = true
		mk.RecoverAt = map[string]time.Time{}
		s := summarize(journal()[:3], mk, met, nil, tbl, nil, nil)
		if len(s.Problems) != 2 || s.Problems[0] != "interrupted before the end" || !strings.Contains(s.Problems[1], "recovery never started") {
			t.Errorf("problems = %v", s.Problems)
		}
		if !s.IncidentOngoing || s.Incident != 106*time.Second {
			t.Errorf("incident %v ongoing %v", s.Incident, s.IncidentOngoing)
		}
		var b bytes.Buffer
		s.render(&b)
		if !strings.Contains(b.String(), "incident on provider-a for 1m46s, not over when the demo ended") {
			t.Errorf("render:\n%s", b.String())
		}
	})
}

func TestSummarizeNotesOddities(t *testing.T) {
	evs := append(journal(),
		ev(10, "provider-a", "gpt-4o", "Healthy", "Ejected", "ErrorRateExceeded", "before the incident"),
		ev(21, "provider-b", "gpt-4o", "Healthy", "Ejected", "ConsecutiveFailures", "the healthy peer"))
	final := []adminapi.ChannelState{{Channel: "provider-a", Model: "gpt-4o", Phase: "Healthy", TrafficPercent: 100}}
	res := testResults()[:2] // the generator counted fewer requests than the proxy
	s := summarize(evs, testMarks(), testMetrics(t), res, testTable(), final, nil)
	notes := strings.Join(s.Notes, "\n")
	for _, w := range []string{"the proxy counted 4 requests (3 successful), the generator 2 (2 successful)",
		"provider-b × gpt-4o was ejected too", "provider-a × gpt-4o was ejected before the incident",
		"X-Switchyard-Attempts > 1; switchyard_failovers_total is 2"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
}

// TestSummarizeTrafficLeftBeforeTheEjection: when the routing moved the traffic off a failing key
// well before the journal ejected it, the summary says so.
func TestSummarizeTrafficLeftBeforeTheEjection(t *testing.T) {
	evs := journal()
	evs[0].Time, evs[0].Reason, evs[0].Message = at(29.4), "ErrorRateExceeded", "error rate 27.8% (5/18) >= 25% over 10s"
	final := []adminapi.ChannelState{{Channel: "provider-a", Model: "gpt-4o", Phase: "Healthy", TrafficPercent: 100}}
	s := summarize(evs, testMarks(), testMetrics(t), nil, testTable(), final, testSeries())
	if k := s.Keys[0]; !k.Quiet || k.ToQuiet != 500*time.Millisecond || k.ToEjection != 9400*time.Millisecond {
		t.Errorf("story = %+v", k)
	}
	var b bytes.Buffer
	s.render(&b)
	if !strings.Contains(b.String(), "first failure → ejection   9.40s   by ErrorRateExceeded") ||
		!strings.Contains(b.String(), "(client traffic had left it by 0.50s:") {
		t.Errorf("render:\n%s", b.String())
	}
}
