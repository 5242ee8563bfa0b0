package failover_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/replay"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// The differential test: the proxy (over real HTTP, against mock providers scripted attempt by
// attempt) and `switchyard replay` (on the proxy's access log, with the same clock and the same
// random draws) must make the same failover decisions: the same attempts, on the same channels and
// models, in the same order, at the same times, and the health engine must journal the same
// transitions (ejections included) at the same times. Both run the one planner; this proves that
// nothing around it (what the proxy tells it, what replay reads from the log) makes them differ.
//
// The world of every sequence: gpt-4o on channels a and b (failure domain east) and c (west), in
// that order, falling back to gpt-4o-mini and overflowing to gpt-4.1 (both on d); "solo" on a
// alone (the same-channel retry, with a back-off whose cap binds). Each channel answers from its
// own script: a failure rate drawn per sequence, failures drawn among 5xx, 429 with a short or
// long Retry-After and without one, hangs (first-byte timeouts), resets, streams cut before and
// after their first event, streams that stall after it (streamIdle), and context overflows.
//
// Streams cut after text reached the client are continued (streamRecovery Continue, the
// default, two continuations at most) on a channel the planner picks (Plan.Continue): a random
// subset of the channels declares capabilities.prefill for each sequence, and some requests are
// deterministic (temperature 0), so that one may also be regenerated and spliced on a channel
// without it. A continuation is an attempt like any other on both sides: it takes its channel's
// next scripted behaviour (and may fail, or be cut in turn), the engine observes it, and the
// attempts compared include it, with its continuation number.

const (
	diffSequences = 1000
	diffRequests  = 10 // per sequence
	// diffWorkers sequences run at once: they mostly wait on first-byte timeouts, but more of them
	// on 2 cores make spurious timeouts (still decided alike, but less varied traffic).
	diffWorkers = 16
)

var diffT0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// perRequest gives each request its own seeded stream, from the sequence's seed and the request
// id: a request that made no attempt (everything rate limited) is not in the log, and must not
// shift the draws of the requests after it.
func perRequest(seed uint64) func(string) failover.Rand {
	return func(id string) failover.Rand {
		h := fnv.New64a()
		_, _ = h.Write([]byte(id))
		return rand.New(rand.NewPCG(seed, h.Sum64()))
	}
}

// diffAnswer is every channel's answer, in chunks of diffChunk bytes: a continuation (prefilled
// or spliced) elsewhere finds the text already sent at its start, as a model would.
const (
	diffAnswer = "The answer of the differential test, the same on every channel."
	diffChunk  = 8
)

// scripted serves a mock provider, setting the behaviour of each request from a script first:
// one behaviour per call, in order, whatever the model (success once the script runs out). A
// request that ends with an assistant message (a continuation's prefill) is continued after it.
type scripted struct {
	mock   *mockprovider.Server
	mu     sync.Mutex
	script []mockprovider.Behavior
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(b, &req)
	s.mu.Lock()
	next := mockprovider.Behavior{}
	if len(s.script) > 0 {
		next, s.script = s.script[0], s.script[1:]
	}
	next.Text, next.ChunkBytes = diffAnswer, diffChunk
	next.Prefill = len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "assistant"
	s.mock.SetBehavior(req.Model, next)
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(b))
	s.mock.ServeHTTP(w, r)
}

// failure kinds, with their weights in a failure draw.
var failureKinds = []struct {
	name   string
	weight int
	b      mockprovider.Behavior
}{
	{"5xx", 25, mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503}},
	{"502", 5, mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 502}},
	{"429 short", 8, mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 1}},
	{"429 short 2s", 4, mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 2}},
	{"429 long", 5, mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 30}},
	{"429 bare", 8, mockprovider.Behavior{Mode: mockprovider.ModeRateLimit}},
	{"timeout", 10, mockprovider.Behavior{Mode: mockprovider.ModeHang}},
	{"reset", 10, mockprovider.Behavior{Mode: mockprovider.ModeReset}},
	{"cut before first event", 8, mockprovider.Behavior{Mode: mockprovider.ModeCut, After: 0}},
	{"cut after first event", 7, mockprovider.Behavior{Mode: mockprovider.ModeCut, After: 1}},
	{"cut after three events", 5, mockprovider.Behavior{Mode: mockprovider.ModeCut, After: 3}},
	{"stall after first event", 6, mockprovider.Behavior{Mode: mockprovider.ModeStall, After: 1}},
	{"context overflow", 10, mockprovider.Behavior{Mode: mockprovider.ModeContextLength}},
}

func drawFailure(rng *rand.Rand) mockprovider.Behavior {
	total := 0
	for _, k := range failureKinds {
		total += k.weight
	}
	n := rng.IntN(total)
	for _, k := range failureKinds[:len(failureKinds)-1] {
		if n < k.weight {
			return k.b
		}
		n -= k.weight
	}
	return failureKinds[len(failureKinds)-1].b // n < total: what is left is the last kind's
}

// sequence is one generated world and its traffic.
type sequence struct {
	seed     uint64
	strategy string
	rollout  string                             // the chat policy's spec.rollout ("" for none): the listed cohort's walk too
	scripts  map[string][]mockprovider.Behavior // channel → behaviours, in call order
	models   []string                           // per request
	gaps     []time.Duration                    // before each request
	prefill  map[string]bool                    // channels whose models declare capabilities.prefill
	determ   []bool                             // per request: temperature 0 (a regeneration may be spliced)
}

func generate(seed uint64) sequence {
	rng := rand.New(rand.NewPCG(seed, 1))
	sq := sequence{seed: seed, strategy: []string{"Priority", "HealthScore", "Weighted"}[rng.IntN(3)], scripts: map[string][]mockprovider.Behavior{}}
	// A third of the sequences roll the policy out to half of the requests: those in the
	// listed cohort walk a, b, c in order whatever the engine says (cohort.go).
	if rng.IntN(3) == 0 {
		sq.rollout = "{percent: 50}"
	}
	for _, ch := range []string{"a", "b", "c", "d"} {
		fail := []float64{0.05, 0.3, 0.7, 0.95}[rng.IntN(4)]
		var script []mockprovider.Behavior
		for range 4 * diffRequests {
			b := mockprovider.Behavior{}
			if rng.Float64() < fail {
				b = drawFailure(rng)
			}
			script = append(script, b)
		}
		sq.scripts[ch] = script
	}
	for i := range diffRequests {
		m := "gpt-4o"
		if rng.IntN(5) == 0 {
			m = "solo"
		}
		sq.models = append(sq.models, m)
		gap := time.Duration(rng.Int64N(int64(4 * time.Second)))
		if rng.IntN(10) == 0 {
			gap += 15 * time.Second
		}
		if i == 0 {
			gap = 0 // the engine is configured at the first request's time in both
		}
		sq.gaps = append(sq.gaps, gap)
	}
	// Drawn last, so that the draws above stay those of the sequences before continuations.
	sq.prefill = map[string]bool{}
	for _, ch := range []string{"a", "b", "c", "d"} {
		sq.prefill[ch] = rng.IntN(2) == 0
	}
	for range diffRequests {
		sq.determ = append(sq.determ, rng.IntN(2) == 0)
	}
	return sq
}

func manifests(strategy, rollout string, prefill map[string]bool, urls map[string]string) string {
	channel := func(name, region string, models string) string {
		if prefill[name] {
			models = strings.ReplaceAll(models, "}", ", capabilities: {prefill: true}}")
		}
		return fmt.Sprintf(`---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: %s}
spec:
  provider: openai
  baseURL: %s/v1
  credentialsRef: {name: keys, key: k}
  models: %s
  failureDomain: {region: %s}
  timeouts: {request: 3s, fallbackRequest: 2s, firstByte: 50ms, streamIdle: 300ms}
`, name, urls[name], models, region)
	}
	return `apiVersion: v1
kind: Secret
metadata: {name: keys}
stringData: {k: sk-differential}
` + channel("a", "east", "[{name: gpt-4o}, {name: solo}]") +
		channel("b", "east", "[{name: gpt-4o}]") +
		channel("c", "west", "[{name: gpt-4o}]") +
		channel("d", "north", "[{name: gpt-4o-mini}, {name: gpt-4.1}]") + `---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: a}, {name: b}, {name: c}]
  strategy: ` + strategy + `
  fallbackModels: [gpt-4o-mini]
  contextOverflowModels: [gpt-4.1]
  retry: {maxAttempts: 4, backoff: {base: 100ms, max: 150ms}}
` + rolloutLine(rollout) + `---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: mini}
spec:
  models: [gpt-4o-mini, gpt-4.1]
  channels: [{name: d}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: solo}
spec:
  models: [solo]
  channels: [{name: a}]
  retry: {maxAttempts: 3, backoff: {base: 100ms, max: 150ms}}
`
}

func rolloutLine(rollout string) string {
	if rollout == "" {
		return ""
	}
	return "  rollout: " + rollout + "\n"
}

// attemptLine is what both sides are compared on.
type attemptLine struct {
	request string
	number  int
	at      time.Time
	channel string
	model   string
	cont    int // the continuation number of an attempt that continued a broken stream (0: none)
	ok      bool
}

func (a attemptLine) String() string {
	s := fmt.Sprintf("%s #%d %s %s×%s", a.request, a.number, a.at.Format("15:04:05.000000000"), a.channel, a.model)
	if a.cont > 0 {
		s += fmt.Sprintf(" continuation %d", a.cont)
	}
	return s
}

// continued counts the streams a continuation finished.
func continued(attempts []attemptLine) int {
	n := 0
	for _, a := range attempts {
		if a.cont > 0 && a.ok {
			n++
		}
	}
	return n
}

// played is one sequence's run through the proxy.
type played struct {
	log      []byte
	attempts []attemptLine
	events   []string
	answered int
	policies []byte
	outcomes map[string]int // coverage
	end      time.Time      // the last logged attempt
}

func play(t *testing.T, sq sequence) (*played, error) {
	urls := map[string]string{}
	var servers []*httptest.Server
	var mocks []*mockprovider.Server
	defer func() {
		for _, m := range mocks {
			m.Close()
		}
		for _, s := range servers {
			s.Close()
		}
	}()
	for _, ch := range []string{"a", "b", "c", "d"} {
		m := mockprovider.New(mockprovider.Options{Name: ch, APIKey: "sk-differential"})
		mocks = append(mocks, m)
		srv := httptest.NewServer(&scripted{mock: m, script: slices.Clone(sq.scripts[ch])})
		servers = append(servers, srv)
		urls[ch] = srv.URL
	}
	man := manifests(sq.strategy, sq.rollout, sq.prefill, urls)
	in, err := routing.ParseManifests([]routing.ManifestFile{{Path: "differential.yaml", Data: []byte(man)}})
	if err != nil {
		return nil, err
	}
	tbl, problems := routing.Compile(in)
	if len(problems) > 0 {
		return nil, fmt.Errorf("manifests: %v", problems)
	}
	clock := testutil.NewClock(diffT0)
	var accessLog bytes.Buffer
	var logMu sync.Mutex
	srv := proxy.New(proxy.Options{Clock: clock, Rand: perRequest(sq.seed), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		AccessLog: writerFunc(func(b []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return accessLog.Write(b) }), Replica: "differential"})
	srv.Apply(tbl, "differential.yaml")
	// The client may have the whole answer before the proxy has logged and observed its last
	// attempt: the clock must not move before the handler is done.
	handler, done := srv.Handler(), make(chan struct{}, 1)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		handler.ServeHTTP(w, r)
	}))
	servers = append(servers, api)

	p := &played{outcomes: map[string]int{}}
	texts := map[string]string{} // request id → the text of its answered stream
	for i, model := range sq.models {
		clock.Advance(sq.gaps[i])
		temperature := ""
		if sq.determ[i] {
			temperature = `"temperature":0,`
		}
		body := fmt.Sprintf(`{"model":%q,"stream":true,%s"messages":[{"role":"user","content":"request %d"}]}`, model, temperature, i)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return nil, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			return nil, errors.New("the proxy's handler did not return")
		}
		if resp.StatusCode == 200 && !bytes.Contains(b, []byte("stream_interrupted")) {
			p.answered++
			texts[resp.Header.Get("X-Request-Id")] = streamText(b)
		}
		p.outcomes[fmt.Sprintf("HTTP %d", resp.StatusCode)]++
	}
	logMu.Lock()
	p.log = slices.Clone(accessLog.Bytes())
	logMu.Unlock()
	var listed *routing.Policy // the rollout's cohort choice, for the coverage count
	if sq.rollout != "" {
		listed = &routing.Policy{Rollout: &routing.Rollout{Percent: 50}}
	}
	broke := map[string]string{} // request id → the channel of its latest attempt before a continuation
	sc := bufio.NewScanner(bytes.NewReader(p.log))
	for sc.Scan() {
		var l struct {
			TS           time.Time `json:"ts"`
			RequestID    string    `json:"requestId"`
			Attempt      int       `json:"attempt"`
			Channel      string    `json:"channel"`
			Model        string    `json:"model"`
			Outcome      string    `json:"outcome"`
			ErrorCode    string    `json:"errorCode"`
			RetryAfterMs int64     `json:"retryAfterMs"`
			TTFTMs       int64     `json:"ttftMs"`
			Continuation int       `json:"continuation"`
			Error        string    `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, err
		}
		p.attempts = append(p.attempts, attemptLine{l.RequestID, l.Attempt, l.TS, l.Channel, l.Model, l.Continuation, l.Outcome == "success"})
		cov := l.Outcome
		switch {
		case l.Continuation > 0:
			cov = "continuation " + l.Outcome
			if !sq.prefill[l.Channel] {
				cov += " spliced"
			}
			if l.Continuation > 1 {
				p.outcomes["second continuations"]++
			}
			if l.Channel == broke[l.RequestID] {
				p.outcomes["continued on the channel that broke"]++
			}
			if l.Outcome == "success" {
				// The client got one answer, whole: the continuation went on from the text sent.
				if text, ok := texts[l.RequestID]; !ok || text != diffAnswer {
					return nil, fmt.Errorf("request %s was continued on %s, and its client read %q (answered: %v)", l.RequestID, l.Channel, text, ok)
				}
				p.outcomes["answers checked whole"]++
			}
		case l.ErrorCode != "":
			cov += " " + l.ErrorCode
		case l.Outcome == "rate_limited" && l.RetryAfterMs > 0:
			cov += " with Retry-After"
		case l.Outcome == "stream_cut" && l.TTFTMs > 0 && strings.Contains(l.Error, "streamIdle"):
			cov += " stalled after the first event"
		case l.Outcome == "stream_cut" && l.TTFTMs > 0:
			cov += " after the first event"
		}
		if l.Continuation == 0 {
			broke[l.RequestID] = l.Channel
		}
		p.outcomes[cov]++
		p.outcomes["attempts on "+l.Model]++
		if l.Attempt > 1 && l.Continuation == 0 {
			p.outcomes["retries"]++
			if listed != nil && l.Model == "gpt-4o" && failover.ChooseCohort(listed, l.RequestID) == failover.CohortListed {
				p.outcomes["retries in the listed cohort"]++
			}
		}
	}
	// The journals are compared up to the last logged attempt, where replay's view ends (a
	// request that made no attempt, all channels waiting out a Retry-After, is not in the log).
	var end time.Time
	for _, a := range p.attempts {
		if a.at.After(end) {
			end = a.at
		}
	}
	srv.Engine().Tick(end)
	for _, ev := range srv.Engine().Events(0) {
		if !ev.At.After(end) {
			p.events = append(p.events, eventKey(ev.Channel, ev.Model, ev.At.UTC().Format(time.RFC3339Nano), ev.From.String(), ev.To.String(), ev.Reason))
		}
	}
	sort.Strings(p.events)
	p.end = end
	p.policies = []byte(man)
	return p, nil
}

// streamText is the text of a chat completion stream's content deltas.
func streamText(b []byte) string {
	var text strings.Builder
	for line := range strings.Lines(string(b)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &chunk) == nil {
			for _, c := range chunk.Choices {
				text.WriteString(c.Delta.Content)
			}
		}
	}
	return text.String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func eventKey(channel, model, at, from, to, reason string) string {
	return fmt.Sprintf("%s %s×%s %s->%s %s", at, channel, model, from, to, reason)
}

// replayed runs the proxy's access log through replay with the proxy's manifests and the same
// random draws.
func replayed(sq sequence, p *played) ([]attemptLine, []string, int, error) {
	in, err := routing.ParseManifests([]routing.ManifestFile{{Path: "differential.yaml", Data: p.policies}})
	if err != nil {
		return nil, nil, 0, err
	}
	setup, err := replay.NewSetup(in.Policies, in.Channels)
	if err != nil {
		return nil, nil, 0, err
	}
	var attempts []attemptLine
	rep, err := replay.Run(context.Background(), setup, bytes.NewReader(p.log), replay.Options{
		Seed: sq.seed, Rand: perRequest(sq.seed),
		Trace: func(a replay.TracedAttempt) {
			attempts = append(attempts, attemptLine{a.RequestID, a.Number, a.At, a.Channel, a.Model, a.Continuation, a.Outcome == health.OutcomeSuccess})
		},
	})
	if err != nil {
		return nil, nil, 0, err
	}
	var events []string
	for _, c := range rep.Channels {
		for _, e := range c.Events {
			if at, err := time.Parse(time.RFC3339Nano, e.At); err != nil || at.After(p.end) {
				continue
			}
			events = append(events, eventKey(c.Channel, c.Model, e.At, e.From, e.To, e.Reason))
		}
	}
	sort.Strings(events)
	answered := 0
	for _, m := range rep.Models {
		answered += int(m.Requests.Requests - m.Requests.FailedWithPolicy)
	}
	return attempts, events, answered, nil
}

func TestProxyAndReplayDecideAlike(t *testing.T) {
	n := diffSequences
	if testing.Short() {
		n = 100
	}
	type outcome struct {
		p   *played
		err error
	}
	results := make([]outcome, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, diffWorkers)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			p, err := play(t, generate(uint64(i+1)))
			results[i] = outcome{p, err}
		}()
	}
	wg.Wait()

	coverage := map[string]int{}
	failed := 0
	ejections := 0
	for i, res := range results {
		sq := generate(uint64(i + 1))
		if res.err != nil {
			t.Fatalf("sequence %d: the proxy run failed: %v", sq.seed, res.err)
		}
		p := res.p
		for k, v := range p.outcomes {
			coverage[k] += v
		}
		attempts, events, answered, err := replayed(sq, p)
		if err != nil {
			t.Fatalf("sequence %d: replay failed: %v", sq.seed, err)
		}
		for _, e := range p.events {
			if strings.Contains(e, "->Ejected") {
				ejections++
			}
		}
		if diff := firstDiff(p.attempts, attempts); diff != "" {
			failed++
			if failed <= 3 {
				t.Errorf("sequence %d (%s): the attempts differ: %s\nthe proxy's log:\n%s", sq.seed, sq.strategy, diff, p.log)
			}
			continue
		}
		if !slices.Equal(p.events, events) {
			failed++
			if failed <= 3 {
				t.Errorf("sequence %d (%s): the journals differ:\nproxy:\n  %s\nreplay:\n  %s", sq.seed, sq.strategy,
					strings.Join(p.events, "\n  "), strings.Join(events, "\n  "))
			}
			continue
		}
		if answered != p.answered {
			failed++
			if failed <= 3 {
				t.Errorf("sequence %d: the proxy answered %d requests, replay says %d", sq.seed, p.answered, answered)
			}
			continue
		}
		if pc, rc := continued(p.attempts), continued(attempts); pc != rc {
			failed++
			if failed <= 3 {
				t.Errorf("sequence %d: the proxy continued %d streams, replay %d", sq.seed, pc, rc)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d sequences decided differently", failed, n)
	}
	coverage["ejections"] = ejections
	t.Logf("%d sequences of %d requests; coverage: %v", n, diffRequests, coverage)
	// The generator must keep producing every kind of outcome and every kind of decision, or this
	// test proves less than it says.
	for _, want := range []string{"server_error", "rate_limited", "rate_limited with Retry-After", "timeout", "connection_error",
		"stream_cut", "stream_cut after the first event", "stream_cut stalled after the first event", "client_error context_length_exceeded",
		"attempts on gpt-4o-mini", "attempts on gpt-4.1", "attempts on solo", "retries", "retries in the listed cohort",
		"continuation success", "continuation success spliced", "continuation stream_cut", "continuation server_error",
		"second continuations", "continued on the channel that broke", "answers checked whole",
		"ejections", "HTTP 429", "HTTP 503", "HTTP 200"} {
		if coverage[want] < 5 && !(testing.Short() && (want == "HTTP 429" || want == "continuation success spliced")) {
			t.Errorf("coverage: %q happened %d times over %d sequences", want, coverage[want], n)
		}
	}
}

// firstDiff describes the first difference of two attempt lists, or "".
func firstDiff(proxyAttempts, replayAttempts []attemptLine) string {
	for i := range max(len(proxyAttempts), len(replayAttempts)) {
		var a, b string
		if i < len(proxyAttempts) {
			a = proxyAttempts[i].String()
		}
		if i < len(replayAttempts) {
			b = replayAttempts[i].String()
		}
		if a != b || (i < len(proxyAttempts) && i < len(replayAttempts) && !proxyAttempts[i].at.Equal(replayAttempts[i].at)) {
			return fmt.Sprintf("attempt %d: proxy %q, replay %q (proxy made %d attempts, replay %d)", i+1, a, b, len(proxyAttempts), len(replayAttempts))
		}
	}
	return ""
}
