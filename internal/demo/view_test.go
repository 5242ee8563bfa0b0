package demo

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
)

func TestRowsFrom(t *testing.T) {
	now := at(30)
	cd := now.Add(6500 * time.Millisecond)
	ch := adminapi.ChannelsResponse{Now: now, Channels: []adminapi.ChannelState{
		{Channel: "provider-a", Model: "gpt-4o", Phase: "Ejected", HealthScore: 12, TrafficPercent: 0, WindowRequests: 20,
			WindowFailures: 9, Ejections: 1, CooldownUntil: &cd},
		{Channel: "provider-b", Model: "gpt-4o", Phase: "Healthy", HealthScore: 100, TrafficPercent: 100, WindowRequests: 230,
			P95LatencyMillis: 187},
	}}
	met, err := ParseMetrics(strings.NewReader(`
switchyard_upstream_attempts_total{channel="provider-a",model="gpt-4o",outcome="success",provider="openai"} 400
switchyard_upstream_attempts_total{channel="provider-a",model="gpt-4o",outcome="server_error",provider="openai"} 6
switchyard_upstream_attempts_total{channel="provider-a",model="gpt-4o",outcome="timeout",provider="openai"} 2
switchyard_upstream_attempts_total{channel="provider-a",model="gpt-4o",outcome="canceled",provider="openai"} 3
switchyard_upstream_attempts_total{channel="provider-a",model="gpt-4o",outcome="rate_limited",provider="openai"} 1
switchyard_upstream_attempts_total{channel="provider-b",model="gpt-4o",outcome="success",provider="azure-openai"} 250
`))
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsFrom(ch, met, map[string]float64{"provider-b|gpt-4o": 1, "provider-a|gpt-4o": 0})
	if len(rows) != 2 {
		t.Fatalf("rows = %+v", rows)
	}
	a, b := rows[0], rows[1]
	if a.Attempts != 409 || a.Failed != 8 || a.CooldownLeft != 6500*time.Millisecond || a.Served != 0 || a.Score != 12 {
		t.Errorf("provider-a row = %+v", a)
	}
	if b.Attempts != 250 || b.Failed != 0 || b.Served != 1 || b.P95 != 187 {
		t.Errorf("provider-b row = %+v", b)
	}
	if got := rowsFrom(ch, met, nil)[0].Served; got != -1 {
		t.Errorf("served without history = %v, want -1", got)
	}
}

func TestServedShares(t *testing.T) {
	before := map[string]float64{"a|gpt-4o": 100, "b|gpt-4o": 0, "a|mini": 50, "b|mini": 50}
	after := map[string]float64{"a|gpt-4o": 100, "b|gpt-4o": 40, "a|mini": 55, "b|mini": 65, "c|new": 3}
	got := servedShares(before, after)
	want := map[string]float64{"a|gpt-4o": 0, "b|gpt-4o": 1, "a|mini": 0.25, "b|mini": 0.75, "c|new": 1}
	if len(got) != len(want) {
		t.Fatalf("shares = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("share %s = %v, want %v", k, got[k], v)
		}
	}
	// No answers in between: no share at all (unknown), not 0%.
	if got := servedShares(before, before); len(got) != 0 {
		t.Errorf("idle shares = %v", got)
	}
}

func TestFormatting(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0:00.0", 1500 * time.Millisecond: "0:01.5", 61*time.Second + 940*time.Millisecond: "1:01.9",
		59*time.Second + 960*time.Millisecond: "1:00.0", -time.Second: "0:00.0"} {
		if got := clockTenths(d); got != want {
			t.Errorf("clockTenths(%v) = %q, want %q", d, got, want)
		}
	}
	if got := clock(125 * time.Second); got != "2:05" {
		t.Errorf("clock = %q", got)
	}
	e := adminapi.Event{Time: at(20.43), Channel: "provider-a", Model: "gpt-4o", From: "Healthy", To: "Ejected",
		Reason: "ConsecutiveFailures", Actor: "rule", Message: "5 consecutive failures (last: server_error)"}
	want := "0:20.4  provider-a × gpt-4o      Healthy → Ejected      ConsecutiveFailures (rule): 5 consecutive failures (last: server_error)"
	if got := formatEvent(e, t0); got != want {
		t.Errorf("formatEvent\n got %q\nwant %q", got, want)
	}
	e.From, e.To, e.Reason, e.Message = "RampingUp", "RampingUp", "RampStep", "traffic share 5% -> 15%"
	if got := formatEvent(e, t0); !strings.Contains(got, "gpt-4o      RampingUp              RampStep (rule)") {
		t.Errorf("a ramp step names its phase once: %q", got)
	}
	if got := formatAction(3*time.Second, "x"); got != "0:03.0  ▶ demo: x" {
		t.Errorf("formatAction = %q", got)
	}
}

func testFrame() frame {
	return frame{
		Elapsed: 31 * time.Second, Stage: "incident", StageLeft: 29*time.Second + 100*time.Millisecond,
		Banner: "INCIDENT: provider-a fails", Rate: 23.96, Failovers: 12,
		Rows: []row{
			{Channel: "provider-a", Model: "gpt-4o", Phase: "Ejected", CooldownLeft: 6200 * time.Millisecond, Score: 0, Traffic: 0,
				Served: 0, Attempts: 409, Failed: 8, WindowReq: 20, WindowFail: 9, Ejections: 1},
			{Channel: "provider-b", Model: "gpt-4o", Phase: "Healthy", Score: 100, Traffic: 100, Served: 1, Attempts: 250,
				WindowReq: 230, P95: 187, Panic: true},
		},
		Clients: []clientRow{
			{Model: "gpt-4o", ProxyTotal: 640, ProxyErrors: 1, Gen: clientStats{Model: "gpt-4o", Sent: 640, OK: 639, Errors: 1, FailedOver: 8}},
			{ProxyTotal: 640, ProxyErrors: 1, Gen: clientStats{Sent: 640, OK: 639, Errors: 1, FailedOver: 8}},
		},
		Log:      []string{"0:20.0  ▶ demo: provider-a starts failing", "0:20.4  provider-a × gpt-4o ..."},
		LogTotal: 9,
	}
}

func TestRenderFrame(t *testing.T) {
	out := renderFrame(testFrame())
	lines := strings.Split(out, "\n")
	for i, w := range []string{
		"Switchyard demo   0:31   INCIDENT (0:30 left)",
		"INCIDENT: provider-a fails",
		"Traffic 24.0 req/s   failovers 12 (switchyard_failovers_total)",
		"",
		"CHANNEL     MODEL   PHASE          SCORE  TRAFFIC  SERVED  ATTEMPTS  FAILED  WINDOW  P95    EJECTED",
		"provider-a  gpt-4o  Ejected (7s)   0      0%       0%      409       8       20/9    -      1",
		"provider-b  gpt-4o  Healthy PANIC  100    100%     100%    250       0       230/0   187ms  0",
		"TRAFFIC share the engine allows · SERVED share of the model's answers, last 5s · WINDOW requests/failures",
	} {
		if i >= len(lines) || lines[i] != w {
			t.Errorf("line %d:\n got %q\nwant %q\n%s", i, lines[min(i, len(lines)-1)], w, out)
		}
	}
	for _, w := range []string{
		"CLIENTS  REQUESTS  ERRORS  SUCCESS  │ GENERATOR: SENT  ERRORS  FAILED OVER",
		"gpt-4o   640       1       99.84%   │ 640              1       8",
		"all      640       1       99.84%   │ 640              1       8",
		"Journal (GET /admin/v1/events) and demo actions, 9 so far:\n0:20.0  ▶ demo: provider-a starts failing\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("frame lacks %q:\n%s", w, out)
		}
	}
}

func TestRenderStatus(t *testing.T) {
	got := renderStatus(testFrame())
	want := "[0:31 incident (0:30 left)] 24.0 req/s, 640 requests, 1 client errors, 12 failovers" +
		" | provider-a/gpt-4o Ejected (7s) score 0 traffic 0% served 0%" +
		" | provider-b/gpt-4o Healthy PANIC score 100 traffic 100% served 100%"
	if got != want {
		t.Errorf("status\n got %q\nwant %q", got, want)
	}
}

func TestFitScreen(t *testing.T) {
	text := "header\ntable row that is rather long\nJournal:\nlog 1\nlog 2\nlog 3\nlog 4\n"
	if got := fitScreen(text, 4, 0, 0); len(got) != 7 {
		t.Errorf("unknown size: %q", got)
	}
	// 6 rows: 5 lines fit (the cursor needs the last); the two oldest log lines go.
	got := fitScreen(text, 4, 0, 6)
	if strings.Join(got, "|") != "header|table row that is rather long|Journal:|log 3|log 4" {
		t.Errorf("short terminal: %q", got)
	}
	// Far too short: one log line is kept at least; lines are cut to the width.
	got = fitScreen(text, 4, 12, 2)
	if strings.Join(got, "|") != "header|table row …|Journal:|log 4" {
		t.Errorf("tiny terminal: %q", got)
	}
}

func TestRowsFromServedZeroForIdleChannels(t *testing.T) {
	ch := adminapi.ChannelsResponse{Channels: []adminapi.ChannelState{
		{Channel: "provider-a", Model: "gpt-4o"}, {Channel: "provider-b", Model: "gpt-4o"}, {Channel: "provider-b", Model: "mini"}}}
	rows := rowsFrom(ch, nil, map[string]float64{"provider-a|gpt-4o": 1})
	if rows[0].Served != 1 || rows[1].Served != 0 || rows[2].Served != -1 {
		t.Errorf("served = %v %v %v, want 1 0 -1 (a model nobody answered is unknown)", rows[0].Served, rows[1].Served, rows[2].Served)
	}
}
