package failover

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// fakeHealth offers the candidates in policy order, minus those marked out; panic routing names
// the first out candidate. limited channels wait out a Retry-After until limitedUntil.
type fakeHealth struct {
	out          map[string]bool
	limited      map[string]bool
	limitedUntil time.Time
}

func (h *fakeHealth) Select(_ time.Time, _ string, cands []health.Candidate, _ health.Strategy, panicRouting bool, _ float64, dst []health.Route) []health.Route {
	dst = dst[:0]
	for _, c := range cands {
		if !h.out[c.Channel] && !h.limited[c.Channel] {
			dst = append(dst, health.Route{Channel: c.Channel})
		}
	}
	if len(dst) == 0 && panicRouting {
		for _, c := range cands {
			return append(dst, health.Route{Channel: c.Channel, Panic: true})
		}
	}
	return dst
}

func (h *fakeHealth) StatusOf(now time.Time, k health.Key) (health.Status, bool) {
	if h.limited[k.Channel] {
		return health.Status{Key: k, Phase: health.PhaseRateLimited, RetryAfterUntil: h.limitedUntil}, true
	}
	return health.Status{Key: k, Phase: health.PhaseHealthy}, true
}

type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

// world: gpt-4o on a, b (region east) and c (west); fallback gpt-4o-mini on d; overflow gpt-4.1
// on d; solo on a alone.
type world struct {
	models   map[string]*Model
	channels map[string]*routing.Channel
}

func (w *world) Model(name string) *Model           { return w.models[name] }
func (w *world) Channel(id string) *routing.Channel { return w.channels[id] }

func newWorld(edit func(w *world)) *world {
	timeouts := routing.Timeouts{Request: 30 * time.Second, FallbackRequest: 20 * time.Second, FirstByte: 10 * time.Second, StreamIdle: 10 * time.Second}
	w := &world{models: map[string]*Model{}, channels: map[string]*routing.Channel{}}
	for _, c := range []struct{ name, region string }{{"a", "east"}, {"b", "east"}, {"c", "west"}, {"d", "north"}} {
		w.channels[c.name] = &routing.Channel{Name: c.name, Timeouts: timeouts, Domain: routing.FailureDomain{Region: c.region}}
	}
	retry := routing.Retry{MaxAttempts: 4, BudgetPercent: 20, BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second}
	settings := health.DefaultSettings("chat")
	chat := &routing.Policy{Name: "chat", Models: []string{"gpt-4o"}, Retry: retry, Settings: settings, PanicRouting: true,
		FallbackModels: []string{"gpt-4o-mini"}, ContextOverflowModels: []string{"gpt-4.1"}}
	mini := &routing.Policy{Name: "mini", Models: []string{"gpt-4o-mini", "gpt-4.1"}, Retry: retry, Settings: settings}
	solo := &routing.Policy{Name: "solo", Models: []string{"solo"}, Retry: retry, Settings: settings, PanicRouting: true}
	add := func(name string, p *Model) { w.models[name] = p }
	cands := func(names ...string) []health.Candidate {
		var out []health.Candidate
		for _, n := range names {
			out = append(out, health.Candidate{Channel: n, Weight: 100})
		}
		return out
	}
	add("gpt-4o", &Model{Name: "gpt-4o", Policy: chat, Candidates: cands("a", "b", "c"), Budget: NewBudget()})
	b := NewBudget()
	add("gpt-4o-mini", &Model{Name: "gpt-4o-mini", Policy: mini, Candidates: cands("d"), Budget: b})
	add("gpt-4.1", &Model{Name: "gpt-4.1", Policy: mini, Candidates: cands("d"), Budget: b})
	add("solo", &Model{Name: "solo", Policy: solo, Candidates: cands("a"), Budget: NewBudget()})
	if edit != nil {
		edit(w)
	}
	return w
}

// walk plays a request: outcomes are taken in order, one per Try; it returns the steps as text
// ("try a/gpt-4o", "wait 1s", "stop unavailable") and the final step.
func walk(t *testing.T, w *world, h Health, model string, outcomes ...Result) ([]string, Step) {
	t.Helper()
	var p Plan
	return walkPlan(t, &p, w, h, model, nil, outcomes...)
}

// walkPlan is walk on p, with setup run after Start (SetFit, SetAllowed).
func walkPlan(t *testing.T, p *Plan, w *world, h Health, model string, setup func(*Plan), outcomes ...Result) ([]string, Step) {
	t.Helper()
	now := t0
	p.Start(w, h, fixedRand(0.5), now, model)
	if setup != nil {
		setup(p)
	}
	var steps []string
	for range 32 {
		st := p.Next(now)
		switch st.Action {
		case ActionTry:
			steps = append(steps, "try "+st.Channel.Name+"/"+st.Model.Name)
			r := Result{Outcome: health.OutcomeSuccess}
			if len(outcomes) > 0 {
				r, outcomes = outcomes[0], outcomes[1:]
			}
			p.Observe(r)
		case ActionWait:
			steps = append(steps, "wait "+st.Wait.String())
			now = now.Add(st.Wait)
		default:
			steps = append(steps, "stop "+[]string{"", "unavailable", "rate-limited", "pass-through", "unfit", "answered"}[st.Stop])
			return steps, st
		}
	}
	t.Fatal("the plan did not end")
	return nil, Step{}
}

func fail(o health.Outcome) Result { return Result{Outcome: o, Detail: o.String()} }

func TestPlanOrderOfResort(t *testing.T) {
	server, timeout := fail(health.OutcomeServerError), fail(health.OutcomeTimeout)
	limited := func(ra time.Duration) Result { return Result{Outcome: health.OutcomeRateLimited, RetryAfter: ra} }
	overflow := Result{Outcome: health.OutcomeClientError, ErrCode: CodeContextLengthExceeded}
	for _, tt := range []struct {
		name     string
		model    string
		out      []string // channels the engine does not offer
		outcomes []Result
		want     string
	}{
		{"answered at once", "gpt-4o", nil, nil, "try a/gpt-4o, stop answered"},
		{"another failure domain first", "gpt-4o", nil, []Result{server}, "try a/gpt-4o, try c/gpt-4o, stop answered"},
		{"the same domain when it is all that is left", "gpt-4o", nil, []Result{server, server}, "try a/gpt-4o, try c/gpt-4o, try b/gpt-4o, stop answered"},
		{"then the fallback model", "gpt-4o", nil, []Result{server, timeout, server}, "try a/gpt-4o, try c/gpt-4o, try b/gpt-4o, try d/gpt-4o-mini, stop answered"},
		{"maxAttempts ends it", "gpt-4o", nil, []Result{server, server, server, server}, "try a/gpt-4o, try c/gpt-4o, try b/gpt-4o, try d/gpt-4o-mini, stop unavailable"},
		{"a short Retry-After is waited out on the same channel", "gpt-4o", nil, []Result{limited(time.Second)}, "try a/gpt-4o, wait 1s, try a/gpt-4o, stop answered"},
		{"a long Retry-After moves on", "gpt-4o", nil, []Result{limited(30 * time.Second)}, "try a/gpt-4o, try c/gpt-4o, stop answered"},
		{"a 429 without Retry-After moves on", "gpt-4o", nil, []Result{limited(0)}, "try a/gpt-4o, try c/gpt-4o, stop answered"},
		{"every attempt rate limited: 429", "gpt-4o", nil, []Result{limited(0), limited(0), limited(0), limited(0)}, "try a/gpt-4o, try c/gpt-4o, try b/gpt-4o, try d/gpt-4o-mini, stop rate-limited"},
		{"the only channel again after a back-off", "solo", nil, []Result{server}, "try a/solo, wait 75ms, try a/solo, stop answered"},
		// (a is still routable, so panic routing does not apply: it is for channels that are out.)
		{"the only channel once only", "solo", nil, []Result{server, server}, "try a/solo, wait 75ms, try a/solo, stop unavailable"},
		{"never after a timeout", "solo", nil, []Result{timeout}, "try a/solo, stop unavailable"},
		{"never after a 429 that is not waited out", "solo", nil, []Result{limited(0)}, "try a/solo, stop rate-limited"},
		{"context overflow goes to the larger model", "gpt-4o", nil, []Result{overflow}, "try a/gpt-4o, try d/gpt-4.1, stop answered"},
		{"once per request", "gpt-4o", nil, []Result{overflow, overflow}, "try a/gpt-4o, try d/gpt-4.1, stop pass-through"},
		{"another 4xx is the caller's", "gpt-4o", nil, []Result{fail(health.OutcomeClientError)}, "try a/gpt-4o, stop pass-through"},
		{"panic routing when every channel is out", "gpt-4o", []string{"a", "b", "c", "d"}, nil, "try a/gpt-4o, stop answered"},
		{"panic routing tries the least-bad ones in turn", "gpt-4o", []string{"a", "b", "c", "d"}, []Result{server, server}, "try a/gpt-4o, try b/gpt-4o, try c/gpt-4o, stop answered"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHealth{out: map[string]bool{}}
			for _, c := range tt.out {
				h.out[c] = true
			}
			steps, _ := walk(t, newWorld(nil), h, tt.model, tt.outcomes...)
			if got := strings.Join(steps, ", "); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// fit: a and b cannot take the request (no vision); overflow: every channel of gpt-4o is too
// small for the prompt.
type fit struct {
	unfit    map[string]bool
	overflow bool
}

func (f fit) Unfit(ch *routing.Channel, model string) string {
	if f.unfit[ch.Name] {
		return "no vision on " + ch.Name
	}
	return ""
}

func (f fit) OverflowsAll(m *Model) bool { return f.overflow && m.Name == "gpt-4o" }

// allowOnly is a client allowed the listed models only.
type allowOnly []string

func (a allowOnly) Allows(model string) bool { return slices.Contains(a, model) }

// A client allowed only gpt-4o reaches neither gpt-4o's fallbackModels nor its
// contextOverflowModels: the hops are skipped, named in Skipped, and the request ends as it would
// have without them (a 503, the overflow's 400 handed back). A client allowed them gets them.
func TestPlanHopsStayWithinTheClientsModels(t *testing.T) {
	server := fail(health.OutcomeServerError)
	overflow := Result{Outcome: health.OutcomeClientError, ErrCode: CodeContextLengthExceeded}
	for _, tt := range []struct {
		name     string
		allow    Allowed
		fit      Fit
		outcomes []Result
		want     string
		skipped  []string
	}{
		{"fallback skipped", allowOnly{"gpt-4o"}, nil, []Result{server, server, server},
			"try a/gpt-4o, try c/gpt-4o, try b/gpt-4o, stop unavailable", []string{"gpt-4o-mini"}},
		{"fallback allowed", allowOnly{"gpt-4o", "gpt-4o-mini"}, nil, []Result{server, server, server},
			"try a/gpt-4o, try c/gpt-4o, try b/gpt-4o, try d/gpt-4o-mini, stop answered", nil},
		{"no client: every model", nil, nil, []Result{server, server, server},
			"try a/gpt-4o, try c/gpt-4o, try b/gpt-4o, try d/gpt-4o-mini, stop answered", nil},
		{"answered overflow skipped: the 400 goes back", allowOnly{"gpt-4o"}, nil, []Result{overflow},
			"try a/gpt-4o, stop pass-through", []string{"gpt-4.1"}},
		{"answered overflow allowed", allowOnly{"gpt-4o", "gpt-4.1"}, nil, []Result{overflow},
			"try a/gpt-4o, try d/gpt-4.1, stop answered", nil},
		{"certain overflow skipped: sent to the requested model", allowOnly{"gpt-4o"}, fit{overflow: true}, nil,
			"try a/gpt-4o, stop answered", []string{"gpt-4.1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var p Plan
			steps, _ := walkPlan(t, &p, newWorld(nil), &fakeHealth{}, "gpt-4o", func(p *Plan) {
				p.SetAllowed(tt.allow)
				p.SetFit(tt.fit)
			}, tt.outcomes...)
			if got := strings.Join(steps, ", "); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if !slices.Equal(p.Skipped(), tt.skipped) {
				t.Errorf("skipped %v, want %v", p.Skipped(), tt.skipped)
			}
		})
	}
}

func TestPlanSkipsChannelsThatCannotTakeTheRequest(t *testing.T) {
	for _, tt := range []struct {
		name string
		fit  fit
		want string
	}{
		{"an unfit channel is passed over", fit{unfit: map[string]bool{"a": true}}, "try b/gpt-4o, stop answered"},
		{"a certain overflow goes to the larger model before sending", fit{overflow: true}, "try d/gpt-4.1, stop answered"},
		{"no channel can take it: a 400 naming what is missing", fit{unfit: map[string]bool{"a": true, "b": true, "c": true, "d": true}}, "stop unfit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var p Plan
			p.Start(newWorld(nil), &fakeHealth{}, fixedRand(0.5), t0, "gpt-4o")
			p.SetFit(tt.fit)
			var steps []string
			for range 8 {
				st := p.Next(t0)
				if st.Action == ActionTry {
					steps = append(steps, "try "+st.Channel.Name+"/"+st.Model.Name)
					p.Observe(Result{Outcome: health.OutcomeSuccess})
					continue
				}
				steps = append(steps, "stop "+[]string{"", "unavailable", "rate-limited", "pass-through", "unfit", "answered"}[st.Stop])
				if st.Stop == StopUnfit && !strings.Contains(st.Detail, "no vision") {
					t.Errorf("the 400 does not say what is missing: %q", st.Detail)
				}
				break
			}
			if got := strings.Join(steps, ", "); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestPlanEveryChannelWaitingOutARetryAfterAnswers429WithoutAnAttempt(t *testing.T) {
	h := &fakeHealth{limited: map[string]bool{"a": true, "b": true, "c": true}, limitedUntil: t0.Add(7 * time.Second)}
	w := newWorld(func(w *world) { w.models["gpt-4o"].Policy.FallbackModels = nil })
	steps, st := walk(t, w, h, "gpt-4o")
	if got := strings.Join(steps, ", "); got != "stop rate-limited" || st.RetryAfter != 7*time.Second || st.Attempts != 0 {
		t.Errorf("%s, Retry-After %s after %d attempts; want a 429 with Retry-After 7s and no attempt", got, st.RetryAfter, st.Attempts)
	}
}

func TestPlanConsentAndResidencyBindEveryHop(t *testing.T) {
	w := newWorld(func(w *world) {
		w.models["gpt-4o"].Policy.Namespace = "team-a"
		w.models["gpt-4o-mini"].Policy.Namespace = "team-b" // no acceptFallbackFrom
	})
	h := &fakeHealth{out: map[string]bool{"b": true, "c": true}}
	steps, _ := walk(t, w, h, "gpt-4o", fail(health.OutcomeServerError), fail(health.OutcomeServerError))
	if got := strings.Join(steps, ", "); strings.Contains(got, "gpt-4o-mini") {
		t.Errorf("a fallback into another namespace without its consent: %s", got)
	}
	w.models["gpt-4o-mini"].Policy.AcceptFallbackFrom = []string{"team-a"}
	w.models["gpt-4o"].Policy.RequireResidency = []string{"kz"}
	w.channels["a"].Residency = "kz"
	steps, _ = walk(t, w, h, "gpt-4o", fail(health.OutcomeServerError), fail(health.OutcomeServerError))
	if got := strings.Join(steps, ", "); strings.Contains(got, "gpt-4o-mini") {
		t.Errorf("the fallback's channel d is outside the first policy's residency: %s", got)
	}
	w.channels["d"].Residency = "kz"
	steps, _ = walk(t, w, h, "gpt-4o", fail(health.OutcomeServerError), fail(health.OutcomeServerError))
	if got := strings.Join(steps, ", "); !strings.Contains(got, "try d/gpt-4o-mini") {
		t.Errorf("consent given and d resident: want the fallback, got %s", got)
	}
}

func TestPlanDeadlineBoundsAttemptsAndWaits(t *testing.T) {
	w := newWorld(func(w *world) {
		for _, c := range w.channels {
			c.Timeouts.Request, c.Timeouts.FallbackRequest = 2*time.Second, 1500*time.Millisecond
		}
		w.models["solo"].Policy.Settings.MaxRetryAfterWait = 10 * time.Second
	})
	var p Plan
	p.Start(w, &fakeHealth{}, fixedRand(0), t0, "solo")
	if st := p.Next(t0); st.Action != ActionTry || st.Timeout != 2*time.Second {
		t.Fatalf("first attempt: %+v, want a try with the request timeout", st)
	}
	// A 429 whose Retry-After ends after the deadline (t0 + 3.5s) is not waited out.
	p.Observe(Result{Outcome: health.OutcomeRateLimited, RetryAfter: 4 * time.Second})
	if st := p.Next(t0.Add(time.Second)); st.Action != ActionStop {
		t.Fatalf("after a 429 beyond the deadline: %+v, want a stop", st)
	}
	// A later attempt gets what is left of the deadline, capped by fallbackRequest.
	p.Start(w, &fakeHealth{}, fixedRand(0), t0, "gpt-4o")
	p.Next(t0)
	p.Observe(Result{Outcome: health.OutcomeServerError})
	if st := p.Next(t0.Add(3 * time.Second)); st.Action != ActionTry || st.Timeout != 500*time.Millisecond {
		t.Fatalf("second attempt 3s in: %+v, want a try with the 500ms left", st)
	}
	p.Observe(Result{Outcome: health.OutcomeServerError, Detail: "HTTP 503"})
	if st := p.Next(t0.Add(4 * time.Second)); st.Action != ActionStop || st.Stop != StopUnavailable || !strings.Contains(st.Detail, "deadline") {
		t.Fatalf("past the deadline: %+v, want a 503 that says so", st)
	}
}

func TestPlanRetryBudget(t *testing.T) {
	w := newWorld(nil)
	h := &fakeHealth{}
	// The floor: BudgetFloorPerSecond × BudgetBuckets retries in a quiet window, then none.
	retries := 0
	for range 100 {
		var p Plan
		p.Start(w, h, fixedRand(0), t0, "gpt-4o")
		p.Next(t0)
		p.Observe(Result{Outcome: health.OutcomeServerError})
		st := p.Next(t0)
		if st.Action == ActionTry {
			retries++
			continue
		}
		if !st.BudgetExhausted || st.Model.Name != "gpt-4o" {
			t.Fatalf("a refused retry: %+v, want BudgetExhausted for gpt-4o", st)
		}
	}
	if retries != BudgetFloorPerSecond*BudgetBuckets {
		t.Errorf("%d retries allowed, want the floor of %d", retries, BudgetFloorPerSecond*BudgetBuckets)
	}
}

// TestBackoffIsJitteredAndCapped: base × 2^(n-1), capped at max, drawn from its upper half.
func TestBackoffIsJitteredAndCapped(t *testing.T) {
	r := routing.Retry{BackoffBase: 100 * time.Millisecond, BackoffMax: 300 * time.Millisecond}
	for _, tt := range []struct {
		attempts int
		u        float64
		want     time.Duration
	}{
		{1, 0, 50 * time.Millisecond},
		{1, 0.999999, 99999950 * time.Nanosecond},
		{2, 0.5, 150 * time.Millisecond},
		{3, 0, 150 * time.Millisecond}, // 400ms capped at 300ms
		{3, 0.999999, 299999850 * time.Nanosecond},
		{70, 0.5, 225 * time.Millisecond}, // a shift past the width of a Duration is the cap
	} {
		if got := Backoff(r, tt.attempts, tt.u); got != tt.want {
			t.Errorf("Backoff(after attempt %d, u=%v) = %s, want %s", tt.attempts, tt.u, got, tt.want)
		}
	}
}

func TestPlanDoesNotAllocatePerRequest(t *testing.T) {
	w := newWorld(nil)
	h := &fakeHealth{}
	var p Plan
	now := t0
	run := func() {
		now = now.Add(time.Second)
		p.Start(w, h, fixedRand(0.5), now, "gpt-4o")
		p.Next(now)
		p.Observe(Result{Outcome: health.OutcomeServerError})
		p.Next(now)
		p.Observe(Result{Outcome: health.OutcomeSuccess})
		p.Next(now)
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("a request with one failover allocates %v times", n)
	}
}

func TestContinuationOrder(t *testing.T) {
	routes := []health.Route{{Channel: "llm/a"}, {Channel: "llm/b"}, {Channel: "llm/c"}, {Channel: "llm/p", Panic: true}}
	all := func(string) bool { return true }
	noB := func(id string) bool { return id != "llm/b" }
	onlyA := func(id string) bool { return id == "llm/a" }
	// failures: channel → timed out
	on := func(failures map[string]bool) func(string) (bool, bool) {
		return func(id string) (bool, bool) { t, ok := failures[id]; return ok, t }
	}
	for _, c := range []struct {
		name   string
		failed map[string]bool
		usable func(string) bool
		want   []string
	}{
		{"others first, the broken one last", map[string]bool{"llm/a": false}, all, []string{"llm/b", "llm/c", "llm/a"}},
		{"a stall never returns to the channel that stalled", map[string]bool{"llm/a": true}, all, []string{"llm/b", "llm/c"}},
		{"unusable channels are left out", map[string]bool{"llm/c": false}, noB, []string{"llm/a", "llm/c"}},
		{"the only usable one is the broken one: same channel after a cut", map[string]bool{"llm/a": false}, onlyA, []string{"llm/a"}},
		{"the only usable one is the broken one: nothing after a stall", map[string]bool{"llm/a": true}, onlyA, nil},
		{"a channel that failed before the stream began goes after those that did not", map[string]bool{"llm/a": false, "llm/b": false}, all, []string{"llm/c", "llm/a", "llm/b"}},
		{"one that timed out before the stream is left out", map[string]bool{"llm/a": true, "llm/b": false}, all, []string{"llm/c", "llm/b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Continuation(routes, on(c.failed), c.usable)
			if !slices.Equal(got, c.want) {
				t.Fatalf("Continuation = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPlanContinueDecidesTheContinuation(t *testing.T) {
	w := newWorld(func(w *world) {
		for _, id := range []string{"a", "b", "c"} {
			caps := routing.Capabilities{Prefill: id != "b"}
			w.channels[id].Models = []routing.ChannelModel{{Name: "gpt-4o", Capabilities: caps}}
		}
	})
	h := &fakeHealth{}
	start := func(setup func(*Plan)) *Plan {
		var p Plan
		p.Start(w, h, fixedRand(0.5), t0, "gpt-4o")
		if setup != nil {
			setup(&p)
		}
		return &p
	}
	brokeOn := func(ids ...string) func(string) (bool, bool) {
		return func(id string) (bool, bool) { return slices.Contains(ids, id), false }
	}
	name := func(ch *routing.Channel, splice bool) string {
		if ch == nil {
			return "none"
		}
		if splice {
			return "splice " + ch.Name
		}
		return "prefill " + ch.Name
	}
	mr := w.models["gpt-4o"]
	for _, c := range []struct {
		name     string
		setup    func(*Plan)
		failed   []string
		passOver map[string]bool
		spliceOK bool
		want     string
	}{
		{"the broken channel last, a prefill channel first", nil, []string{"a"}, nil, false, "prefill c"},
		{"a channel that refused the prefill is passed over", nil, []string{"a"}, map[string]bool{"c": true}, false, "prefill a"},
		{"no prefill channel left and not deterministic: none", nil, []string{"a"}, map[string]bool{"a": true, "c": true}, false, "none"},
		{"no prefill channel left, deterministic: splice on the first routable", nil, []string{"a"}, map[string]bool{"a": true, "c": true}, true, "splice b"},
		{"nothing failed yet: the first channel with prefill", nil, nil, nil, false, "prefill a"},
		{"a channel unfit for the request is not asked", func(p *Plan) { p.SetFit(fit{unfit: map[string]bool{"a": true}}) }, nil, nil, false, "prefill c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := start(c.setup)
			got := name(p.Continue(ContinueInput{Now: t0, Model: mr, Draw: 0.5, Failed: brokeOn(c.failed...), PassOver: c.passOver, SpliceOK: c.spliceOK}))
			if got != c.want {
				t.Fatalf("Continue = %s, want %s", got, c.want)
			}
		})
	}
	mr.Policy.RequireResidency = []string{"kz"}
	w.channels["c"].Residency = "kz"
	if got := name(start(nil).Continue(ContinueInput{Now: t0, Model: mr, Draw: 0.5, Failed: brokeOn()})); got != "prefill c" {
		t.Errorf("with requireResidency kz (only c): Continue = %s, want prefill c", got)
	}
}
