package replay

import (
	"bytes"
	"fmt"
	"time"
)

// The golden logs are built by these functions and written to testdata/ with -update; the test
// checks the files still match what the builders make, so a log and its story cannot drift apart.

var t10 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

type logBuilder struct {
	buf bytes.Buffer
	n   int
}

var statusOf = map[string]int{
	"success": 200, "server_error": 503, "timeout": 0, "connection_error": 0, "stream_cut": 200,
	"rate_limited": 429, "client_error": 400,
}

// attempt writes one access-log line in the contract's format; requestID "" leaves it out.
func (l *logBuilder) attempt(ts time.Time, requestID, channel, model string, attempt int, outcome string, latencyMs int) {
	rid := ""
	if requestID != "" {
		rid = fmt.Sprintf(`"requestId":%q,`, requestID)
	}
	fmt.Fprintf(&l.buf, `{"ts":%q,%s"channel":%q,"model":%q,"attempt":%d,"status":%d,"outcome":%q,"latencyMs":%d,"ttftMs":0,"stream":true}`+"\n",
		ts.UTC().Format("2006-01-02T15:04:05.000Z07:00"), rid, channel, model, attempt, statusOf[outcome], outcome, latencyMs)
}

// request logs one client request: attempt 1 on first with outcome; when that failed and
// fallback is set, attempt 2 on fallback 300 ms later with fallbackOutcome.
func (l *logBuilder) request(ts time.Time, model, first, outcome, fallback, fallbackOutcome string) {
	l.n++
	id := fmt.Sprintf("r-%d", l.n)
	lat := 800
	if outcome == "timeout" {
		lat = 10000
	} else if outcome != "success" {
		lat = 150
	}
	l.attempt(ts, id, first, model, 1, outcome, lat)
	if outcome != "success" && fallback != "" {
		l.attempt(ts.Add(300*time.Millisecond), id, fallback, model, 2, fallbackOutcome, 900)
	}
}

func (l *logBuilder) raw(s string) { l.buf.WriteString(s + "\n") }

// lines is the number of lines written so far.
func (l *logBuilder) lines() int { return bytes.Count(l.buf.Bytes(), []byte("\n")) }

// steady logs one request every `every` from `from` (inclusive) to `to` (exclusive) on first,
// with outcome chosen per index by fail (nil: all succeed).
func (l *logBuilder) steady(from, to time.Time, every time.Duration, model, first, fallback string, fail func(i int) string) {
	i := 0
	for ts := from; ts.Before(to); ts = ts.Add(every) {
		o := "success"
		if fail != nil {
			o = fail(i)
		}
		l.request(ts, model, first, o, fallback, "success")
		i++
	}
}

const bankPolicy = `# The bank's contact-centre assistant (seed notes): a 120 s window, at least 200 requests,
# eject at 18% failures (timeouts and 5xx); consecutive failures set high so only the rate decides.
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata:
  name: bank-assistant
spec:
  models: [gpt-4o]
  channels:
    - name: primary
    - name: backup
  scenario: chat
  detection:
    window: 120s
    minRequests: 200
    errorRatePercent: 18
    consecutiveFailures: 1000
`

// bankLog: from 09:58 the primary answers normally (2 requests/s, and a burst of 60 at
// 09:59:59); from 10:00 failures grow, 8 in the first minute and 44 in the second, 20 of the 52
// timeouts (the bank counts them with the 5xx; chat has no timeout-rate rule). At 10:01:59 the
// window [09:59:59, now] holds 300 requests with 52 failures (17.3%); at the 10:02:00 bucket
// boundary the burst leaves it and the window is 52/240 = 21.7% >= 18%. Every failed request was
// failed over to the backup by the proxy that wrote the log. The outage goes on at 40% to 10:03.
func bankLog() []byte {
	var l logBuilder
	l.steady(t10.Add(-2*time.Minute), t10.Add(-time.Second), 500*time.Millisecond, "gpt-4o", "primary", "backup", nil)
	for i := range 60 {
		l.request(t10.Add(-time.Second+time.Duration(i)*16*time.Millisecond), "gpt-4o", "primary", "success", "", "")
	}
	timeouts := 0
	fail := func(i int) string {
		// first minute (i < 120): every 15th request fails (8); second minute: 44 of 120
		var failed bool
		if i < 120 {
			failed = i%15 == 14
		} else {
			j := i - 120
			failed = j%30 < 11 // 11 of every 30: 44 of 120
		}
		if !failed {
			return "success"
		}
		if timeouts < 20 && i%2 == 0 {
			timeouts++
			return "timeout"
		}
		return "server_error"
	}
	l.steady(t10, t10.Add(2*time.Minute), 500*time.Millisecond, "gpt-4o", "primary", "backup", fail)
	l.steady(t10.Add(2*time.Minute), t10.Add(3*time.Minute), 500*time.Millisecond, "gpt-4o", "primary", "backup", func(i int) string {
		if i%5 < 2 {
			return "server_error"
		}
		return "success"
	})
	return l.buf.Bytes()
}

const chatPolicy = `# GPT-4o on two channels with the chat profile's defaults.
apiVersion: switchyard.io/v1alpha1
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

// noisyLog: 2 requests/s for 5 min; at 10:02 a network hiccup gives 4 timeouts and 2 server
// errors within 3 s, never 5 in a row. Chat's rules must not eject (6/120 in the window, 10% of
// the recent window).
func noisyLog() []byte {
	var l logBuilder
	burst := map[int]string{240: "timeout", 241: "timeout", 243: "server_error", 244: "timeout", 246: "timeout", 247: "server_error"}
	l.steady(t10, t10.Add(5*time.Minute), 500*time.Millisecond, "gpt-4o", "openai-direct", "azure-eastus", func(i int) string {
		if o, ok := burst[i]; ok {
			return o
		}
		return "success"
	})
	return l.buf.Bytes()
}

// noiseLog is the design notes' threshold check: "suppose a provider gave four timeouts out of
// forty requests during a network blip; if the rule already trips at that level, the route starts
// to flap for no real benefit". 40 requests in 20 s (2/s) on openai-direct are the whole log, so
// they are the whole window; timeout(i) picks the four timeouts, each failed over to Azure by the
// logging proxy. Chat's rules do not eject: the error rate peaks at 4 of 22 (18%, in a row),
// under 25%, and never 5 fail in a row. The old chat default, timeoutRatePercent 10, ejected both
// at the 20th request with 2 of 20 (TestScenarioStories).
func noiseLog(timeout func(i int) bool) func() []byte {
	return func() []byte {
		var l logBuilder
		l.steady(t10, t10.Add(20*time.Second), 500*time.Millisecond, "gpt-4o", "openai-direct", "azure-eastus", func(i int) string {
			if timeout(i) {
				return "timeout"
			}
			return "success"
		})
		return l.buf.Bytes()
	}
}

// noiseSpreadLog: the four timeouts spread out, every tenth request from the fifth.
var noiseSpreadLog = noiseLog(func(i int) bool { return i%10 == 4 })

// noiseInARowLog: the four timeouts in a row in the middle (requests 19-22).
var noiseInARowLog = noiseLog(func(i int) bool { return i >= 18 && i < 22 })

// rateLimitLog: 2 requests/s for 6 min; from 10:01 to 10:03 the provider answers 429 to 3 of
// every 5 requests (the logging proxy failed them over to Azure). A 429 is a request to slow
// down, never a failure: the channel is RateLimited, not ejected.
func rateLimitLog() []byte {
	var l logBuilder
	l.steady(t10, t10.Add(6*time.Minute), 500*time.Millisecond, "gpt-4o", "openai-direct", "azure-eastus", func(i int) string {
		if i >= 120 && i < 360 && i%5 < 3 {
			return "rate_limited"
		}
		return "success"
	})
	return l.buf.Bytes()
}

// recoveryLog: 1 request/s on openai-direct from 10:00 to 10:22; a hard outage (every attempt a
// 503, failed over to Azure) from 10:01:00 to 10:04:00. Chat ejects after 5 consecutive
// failures, cools down 5 min, probes with the logged attempts (successes by then: 3 in a row,
// 10 s apart), then ramps 5% → 15% → 50% → 100%, 3 min each, and is Healthy again.
func recoveryLog() []byte {
	var l logBuilder
	l.steady(t10, t10.Add(22*time.Minute), time.Second, "gpt-4o", "openai-direct", "azure-eastus", func(i int) string {
		if i >= 60 && i < 240 {
			return "server_error"
		}
		return "success"
	})
	return l.buf.Bytes()
}

// incidentLog: 1 request/s for an hour on openai-direct, with
//   - 10:05:00–10:10:00 a hard outage (a real incident, in the incidents file): detected;
//   - 10:30:00–10:30:40 an incident of 15% errors, spread out (in the file): missed;
//   - 10:45:00 five timeouts in a row nobody filed: a false ejection.
func incidentLog() []byte {
	var l logBuilder
	l.steady(t10, t10.Add(time.Hour), time.Second, "gpt-4o", "openai-direct", "azure-eastus", func(i int) string {
		switch {
		case i >= 300 && i < 600:
			return "server_error"
		case i >= 1800 && i < 1840 && i%7 == 0:
			return "server_error"
		case i >= 2700 && i < 2705:
			return "timeout"
		}
		return "success"
	})
	return l.buf.Bytes()
}

const incidentFile = `# known outages (the post-mortems)
{"channel":"openai-direct","model":"gpt-4o","start":"2026-11-30T10:05:00Z","end":"2026-11-30T10:10:00Z"}
{"channel":"openai-direct","model":"gpt-4o","start":"2026-11-30T10:30:00Z","end":"2026-11-30T10:30:40Z"}
{"channel":"azure-eastus","start":"2026-11-30T10:50:00Z","end":"2026-11-30T10:55:00Z"}
{"channel":"reseller","model":"gpt-4o","start":"2026-11-30T10:00:00Z","end":"2026-11-30T10:01:00Z"}
`

// malformedLog: good lines with every kind of bad input in between.
func malformedLog() []byte {
	var l logBuilder
	at := func(s int) time.Time { return t10.Add(time.Duration(s) * time.Second) }
	l.attempt(at(0), "r-1", "openai-direct", "gpt-4o", 1, "success", 800)
	l.raw(`this is not json`)
	l.raw(`{"ts":"2026-11-30T10:00:01Z","channel":"openai-direct","model":"gpt-4o","status":200`)
	l.raw(`{"channel":"openai-direct","model":"gpt-4o","status":200}`)
	l.raw(`{"ts":"yesterday","channel":"openai-direct","model":"gpt-4o","status":200}`)
	l.raw(`{"ts":"2026-11-30T10:00:02Z","model":"gpt-4o","status":200}`)
	l.raw(`{"ts":"2026-11-30T10:00:02Z","channel":"openai-direct","model":"gpt-4o","outcome":"exploded"}`)
	l.raw(`{"ts":"2026-11-30T10:00:02Z","channel":"openai-direct","model":"gpt-4o","status":700}`)
	l.raw(`{"ts":"2026-11-30T10:00:02Z","channel":"openai-direct","model":"gpt-4o"}`)
	l.raw(`{"ts":"2026-11-30T10:00:02Z","channel":"openai-direct","model":"gpt-4o","status":"200"}`)
	l.raw(``)
	l.attempt(at(3), "r-2", "reseller", "gpt-4o", 1, "success", 800)
	l.attempt(at(3), "r-3", "openai-direct", "gpt-5", 1, "success", 800)
	l.attempt(at(4), "r-4", "reseller", "gpt-4o", 1, "success", 800)
	// valid: extra nested fields, an escape in a string, CRLF, no requestId, status only
	l.raw(`{"ts":"2026-11-30T10:00:05.250Z","requestId":"r-5","channel":"openai\u002ddirect","model":"gpt-4o","status":503,"usage":{"tokens":[1,2,{"x":null}]},"note":"a \"quoted\" word"}` + "\r")
	l.raw(`{"ts":"2026-11-30T10:00:06Z","channel":"openai-direct","model":"gpt-4o","status":200,"latencyMs":512.5}`)
	l.attempt(at(10), "r-6", "openai-direct", "gpt-4o", 1, "success", 800)
	l.attempt(at(8), "r-7", "openai-direct", "gpt-4o", 1, "timeout", 10000)    // 2 s late: sorted into place
	l.attempt(at(1), "r-8", "openai-direct", "gpt-4o", 1, "success", 800)      // 9 s late: beyond the tolerance
	l.attempt(at(11), "r-9", "openai-direct", "gpt-4o", 1, "client_error", 20) // the caller's problem
	l.attempt(at(12), "r-10", "azure-eastus", "gpt-4o", 1, "success", 700)
	return l.buf.Bytes()
}
