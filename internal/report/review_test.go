package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/replay"
)

// Chat's defaults on two channels: a 60 s window, 20 requests, 25% errors, 5 in a row; cooldown
// 5 min (doubling), 3 probes 10 s apart, ramp 5/15/50/100 % × 3 min.
const policy = `apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata:
  name: chat-gpt4o
spec:
  models: [gpt-4o]
  channels:
    - name: openai-direct
    - name: azure-eastus
  scenario: chat
`

var t10 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

type logBuilder struct{ bytes.Buffer }

func (l *logBuilder) attempt(at time.Time, id, channel string, n int, outcome string, latencyMs int) {
	status := map[string]int{"success": 200, "server_error": 503}[outcome]
	fmt.Fprintf(l, `{"ts":%q,"requestId":%q,"channel":%q,"model":"gpt-4o","attempt":%d,"status":%d,"outcome":%q,"latencyMs":%d}`+"\n",
		at.Format(time.RFC3339Nano), id, channel, n, status, outcome, latencyMs)
}

// monthLog is an hour in which every figure of the review is known. Each channel has its own
// request every second (openai-direct's first, then azure-eastus's):
//
//   - 10:05:00-10:10:00 openai-direct answers 503 to everything; each request fails over to
//     azure-eastus, which answers: a real outage. 300 requests pay a 150 ms failed attempt.
//   - 10:30:00-10:32:00 both channels fail every even second and nothing fails over: a problem
//     of the model (or of the callers), not of a channel. Both are ejected at 10:30:29, when
//     the window (10:29:29-10:30:28) holds 15 failures in 60 (25%): two false ejections.
//   - 10:54:00-10:56:00 azure-eastus fails every fifth second (20%, below the policy's 25%),
//     failed over to openai-direct: with --outage-rate 15, a missed outage; 24 more requests pay
//     150 ms.
func monthLog() []byte {
	var l logBuilder
	for s := 0; s < 3600; s++ {
		at := t10.Add(time.Duration(s) * time.Second)
		a, b := "success", "success"
		aFallback, bFallback := "", ""
		switch {
		case s >= 300 && s < 600:
			a, aFallback = "server_error", "success"
		case s >= 1800 && s < 1920 && s%2 == 0:
			a, b = "server_error", "server_error"
		case s >= 3240 && s < 3360 && s%5 == 0:
			b, bFallback = "server_error", "success"
		}
		lat := func(o string) int {
			if o == "success" {
				return 800
			}
			return 150
		}
		ida, idb := fmt.Sprintf("a-%d", s), fmt.Sprintf("b-%d", s)
		l.attempt(at, ida, "openai-direct", 1, a, lat(a))
		l.attempt(at, idb, "azure-eastus", 1, b, lat(b))
		if aFallback != "" {
			l.attempt(at.Add(300*time.Millisecond), ida, "azure-eastus", 2, aFallback, 900)
		}
		if bFallback != "" {
			l.attempt(at.Add(300*time.Millisecond), idb, "openai-direct", 2, bFallback, 900)
		}
	}
	return l.Bytes()
}

// audit gives every request 100 prompt and 400 completion tokens.
func auditLog() []byte {
	var b bytes.Buffer
	for s := 0; s < 3600; s++ {
		for _, id := range []string{"a", "b"} {
			fmt.Fprintf(&b, `{"ts":"x","requestId":"%s-%d","model":"gpt-4o","tokens":{"prompt":100,"completion":400}}`+"\n", id, s)
		}
	}
	return b.Bytes()
}

func review(t *testing.T, opts Options, audit []byte) *Review {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	setup, err := replay.LoadSetup(path, "")
	if err != nil {
		t.Fatal(err)
	}
	var in io.Reader
	if audit != nil {
		in = bytes.NewReader(audit)
	}
	rv, err := Run(context.Background(), setup, bytes.NewReader(monthLog()), replay.Options{}, opts, in)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

func TestReviewFigures(t *testing.T) {
	rv := review(t, Options{OutageRatePercent: 15, Prices: map[string]float64{"gpt-4o": 0.01}}, auditLog())
	var buf bytes.Buffer
	rv.WriteTable(&buf)
	t.Log("\n" + buf.String())

	a, b := rv.Channels[0], rv.Channels[1]
	if a.Channel != "openai-direct" || b.Channel != "azure-eastus" {
		t.Fatalf("channels: %+v", rv.Channels)
	}
	// openai-direct: 3600 own attempts + 24 failovers; 300 + 60 failures.
	if a.Attempts != 3624 || a.Failures != 360 || a.ErrorRatePercent != 9.934 {
		t.Errorf("openai-direct: %d attempts, %d failures, %v%%", a.Attempts, a.Failures, a.ErrorRatePercent)
	}
	// azure-eastus: 3600 own + 300 failovers; 60 + 24 failures.
	if b.Attempts != 3900 || b.Failures != 84 {
		t.Errorf("azure-eastus: %d attempts, %d failures", b.Attempts, b.Failures)
	}
	if a.Ejections != 2 || b.Ejections != 1 || a.FalseEjections != 1 || b.FalseEjections != 1 {
		t.Errorf("ejections: a %d (false %d), b %d (false %d)", a.Ejections, a.FalseEjections, b.Ejections, b.FalseEjections)
	}
	q := rv.Questions
	if q.FalseEjections.Ejections != 3 || q.FalseEjections.False != 2 || q.FalseEjections.NotJudged != 0 {
		t.Errorf("false ejections: %+v", q.FalseEjections)
	}
	ej := rv.Ejections
	if ej[0].At != "2026-11-30T10:05:04Z" || ej[0].Verdict != "real" || ej[0].OtherRatePercent != 0 {
		t.Errorf("the outage's ejection: %+v", ej[0])
	}
	for _, e := range []EjectionReview{ej[1], ej[2]} {
		if e.At != "2026-11-30T10:30:29Z" || e.Verdict != "false" || e.OwnRatePercent != 25 || e.OwnAttempts != 60 ||
			e.OtherRatePercent != 25 || e.OtherAttempts != 60 {
			t.Errorf("the model-wide problem's ejection: %+v", e)
		}
	}
	// Recovery of the outage: first good answer 10:10:00 (the outage's end); cooldown 5 min
	// from 10:05:04, probes at 10:10:04, :14, :24 pass, ramp 4 × 3 min: Healthy at 10:22:24.
	if ej[0].FirstGood != "2026-11-30T10:10:00Z" || ej[0].HealthyAt != "2026-11-30T10:22:24Z" || ej[0].LagSeconds != 744 || ej[0].RecoverSeconds != 1040 {
		t.Errorf("outage recovery: %+v", ej[0])
	}
	// The false ejections: the last failure at 10:31:58, first good answer 10:31:59. Both
	// channels are out from 10:30:29 and panic routing sends the model's traffic to the
	// least-bad one. azure-eastus cools down 5 min: Probing at 10:35:29, when panic routing
	// moves to it (Probing is less bad than Ejected); its probes are answered by those very
	// requests (10:35:29, :39, :49 pass), then the ramp: Healthy at 10:47:49. openai-direct's
	// second ejection cools down 10 min: probes from 10:40:29 pass at 10:40:49, Healthy at
	// 10:52:49. Lags of 20m50s and 15m50s: what the proxy, whose probes answer, would do.
	if ej[1].FirstGood != "2026-11-30T10:31:59Z" || ej[2].FirstGood != "2026-11-30T10:31:59Z" ||
		ej[1].HealthyAt != "2026-11-30T10:52:49Z" || ej[1].LagSeconds != 1250 || ej[2].HealthyAt != "2026-11-30T10:47:49Z" || ej[2].LagSeconds != 950 {
		t.Errorf("the false ejections' recovery: %+v / %+v", ej[1], ej[2])
	}
	if r := q.Recovery; r.LagP50 != 950 || r.LagMax != 1250 || r.TimeToRecoverP50 != 1040 || r.TimeToRecoverMax != 1340 {
		t.Errorf("recovery: %+v", r)
	}
	if q.Recovery.Ejections != 3 || q.Recovery.Recovered != 3 {
		t.Errorf("recovery: %+v", q.Recovery)
	}
	if len(rv.MissedOutages) != 1 {
		t.Fatalf("missed outages: %+v", rv.MissedOutages)
	}
	mo := rv.MissedOutages[0]
	if mo.Channel != "azure-eastus" || mo.From != "2026-11-30T10:54:00Z" || mo.To != "2026-11-30T10:56:00Z" || mo.Attempts != 120 || mo.Failures != 24 || mo.ErrorRatePercent != 20 {
		t.Errorf("missed outage: %+v", mo)
	}
	c := q.Cost
	if c.FailedOver != 324 || c.LatencySeconds != 48.6 || c.LatencyP50 != 0.15 || c.LatencyMax != 0.15 || c.Moved != 324 {
		t.Errorf("cost: %+v", c)
	}
	if c.Tokens == nil || *c.Tokens != 324*500 || c.MoneyUSD == nil || *c.MoneyUSD != 1.62 {
		t.Errorf("tokens %v money %v", c.Tokens, c.MoneyUSD)
	}
	if len(c.Routes) != 2 || c.Routes[0].From != "openai-direct" || c.Routes[0].Requests != 300 || c.Routes[1].Requests != 24 {
		t.Errorf("routes: %+v", c.Routes)
	}
}

// TestReviewDefaults: with the policy's own 25% the 20% stretch is no outage; without an audit
// log or prices the review says what it cannot count.
func TestReviewDefaults(t *testing.T) {
	rv := review(t, Options{}, nil)
	if len(rv.MissedOutages) != 0 || rv.Questions.MissedOutages.RatePercent != "policy's errorRatePercent" {
		t.Errorf("missed outages at the policy's threshold: %+v", rv.MissedOutages)
	}
	c := rv.Questions.Cost
	if c.Tokens != nil || c.MoneyUSD != nil || !strings.Contains(c.MoneyNote, "--audit-log") {
		t.Errorf("without an audit log: %+v", c)
	}
	rv = review(t, Options{}, auditLog())
	if c := rv.Questions.Cost; c.Tokens == nil || c.MoneyUSD != nil || !strings.Contains(c.MoneyNote, "--price") {
		t.Errorf("without prices: %+v", c)
	}
	// A wider margin does not change the verdicts; a negative one (stricter than equal) clears
	// the model-wide ejections.
	rv = review(t, Options{SameRateMargin: -1}, nil)
	if rv.Questions.FalseEjections.False != 0 {
		t.Errorf("margin -1: %+v", rv.Questions.FalseEjections)
	}
}

func TestReviewDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	review(t, Options{OutageRatePercent: 15}, auditLog()).WriteJSON(&a)
	review(t, Options{OutageRatePercent: 15}, auditLog()).WriteJSON(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two runs differ")
	}
	var v map[string]any
	if err := json.Unmarshal(a.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
}
