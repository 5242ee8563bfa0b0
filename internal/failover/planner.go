package failover

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Model is one public model as a policy routes it: what the planner needs of the compiled table.
type Model struct {
	Name   string
	Policy *routing.Policy
	// Strategy is Policy.Strategy, parsed.
	Strategy health.Strategy
	// Candidates are the policy's channels that serve this model, in policy order.
	Candidates []health.Candidate
	// Budget is the policy's retry budget, shared by its models and requests.
	Budget *Budget
}

// Routes looks up the compiled route: the models a request may reach and their channels. Both
// return nil for a name that is not routed.
type Routes interface {
	Model(name string) *Model
	Channel(id string) *routing.Channel
}

// Health is what the planner asks the health engine; *health.Engine implements it. Select
// offers the routable channels in order (or panic routing's least-bad one); StatusOf tells
// whether a channel waits out a Retry-After.
type Health interface {
	Select(now time.Time, model string, cands []health.Candidate, strategy health.Strategy, panicRouting bool, rnd float64, dst []health.Route) []health.Route
	StatusOf(now time.Time, k health.Key) (health.Status, bool)
}

// Fit says whether a channel can serve this very request: its model's capabilities on the
// channel (vision, tools, context window) and whether the request translates into the channel's
// API. The proxy gives one per request; replay and simulate, whose logs and worlds carry no
// request bodies, give none (every channel fits).
type Fit interface {
	// Unfit says why ch cannot serve the request for model ("" when it can).
	Unfit(ch *routing.Channel, model string) string
	// OverflowsAll reports whether the prompt certainly exceeds the context window of every
	// candidate of m: the request then goes to m's contextOverflowModels before any attempt.
	OverflowsAll(m *Model) bool
}

// Allowed says which models the request's client may call: its GatewayClient's models
// (*routing.Client implements it). The proxy gives one for a request made with a client key;
// without one (an open gateway, replay, simulate) every model is allowed.
type Allowed interface {
	Allows(model string) bool
}

// Rand is the planner's only randomness (Select's draws, back-off jitter): uniform in [0, 1).
// Replay, simulate and tests inject a seeded source so that a run can be repeated; the proxy's
// must be safe for concurrent use.
type Rand interface{ Float64() float64 }

// GlobalRand is math/rand/v2's global source: per-thread state, no lock, no allocation.
type GlobalRand struct{}

func (GlobalRand) Float64() float64 { return rand.Float64() }

// Action is what a Step asks of the driver.
type Action uint8

const (
	ActionTry  Action = iota + 1 // run one attempt on Step.Channel for Step.Model
	ActionWait                   // wait Step.Wait, then ask Next again
	ActionStop                   // answer the client: Step.Stop says how
)

func (a Action) String() string {
	switch a {
	case ActionTry:
		return "try"
	case ActionWait:
		return "wait"
	case ActionStop:
		return "stop"
	}
	return "none"
}

// StopKind is how a request ends when no attempt answered it.
type StopKind uint8

const (
	// StopUnavailable: no channel could answer (503). Step.Detail says what failed last.
	StopUnavailable StopKind = iota + 1
	// StopRateLimited: every attempt was a 429, or every channel waits out a Retry-After (429,
	// with Step.RetryAfter, the shortest wait seen; 0 when none was given).
	StopRateLimited
	// StopPassThrough: the last attempt's 4xx is the caller's to fix (content policy, a context
	// overflow with no larger model to go to): hand it back unchanged.
	StopPassThrough
	// StopUnfit: no channel could take the request at all (Detail says what it lacks: images,
	// tools, a context window); nothing was sent. The caller's to change (400).
	StopUnfit
	// StopAnswered: the last attempt answered. The proxy ends such a request without asking;
	// replay and simulate report every outcome and read the end from here.
	StopAnswered
)

// Step is the planner's answer to "what now?".
type Step struct {
	Action Action
	// Try: the channel and the model (a fallback or context-overflow hop may change the model);
	// Timeout bounds the attempt: the channel's request timeout on the first attempt, then its
	// fallbackRequest timeout capped by what is left of the request's deadline.
	Channel *routing.Channel
	Model   *Model
	Timeout time.Duration
	// Panic: no channel is routable; this is panic routing's least-bad one.
	Panic bool
	// Same: a retry of the channel that answered the previous attempt.
	Same bool
	// Wait: how long before the next Try.
	Wait time.Duration
	// Stop: how the request ends, with the figures of its answer.
	Stop       StopKind
	RetryAfter time.Duration
	Attempts   int
	// LastChannel is the ID of the channel whose attempt failed last ("" for none) and Detail
	// what happened to it, or why nothing was routable.
	LastChannel string
	Detail      string
	// BudgetExhausted: the retry budget of Model's policy refused a retry.
	BudgetExhausted bool
}

// Result is how an attempt ended, as the driver saw it. Successes, answers already committed to
// the client and requests the client gave up on end the request without asking the planner.
type Result struct {
	Outcome    health.Outcome
	RetryAfter time.Duration // a 429's Retry-After; 0 when absent
	ErrCode    string        // a 4xx's error code (context_length_exceeded, ...)
	Detail     string        // for the client's 503 message and the access log
}

// CodeContextLengthExceeded is the 400 error code of a prompt too long for the model: it may go
// to a configured larger-context model (contextOverflowModels).
const CodeContextLengthExceeded = "context_length_exceeded"

// Plan walks one client request through channels and models. Its order of resort:
//
//  1. the routable channels of the requested model, in the engine's order, skipping those tried
//     already and those that cannot take the request (Fit), preferring one in another failure
//     domain than the channel that failed last;
//  2. the same channel again only when it is the model's only candidate and its failure was not a
//     timeout or a 429 (a silent provider costs one timeout, not a chain of them), after a
//     jittered exponential back-off (base × 2^(attempts-1), capped at the policy's backoff max,
//     then drawn uniformly from its upper half) that must fit the deadline;
//  3. fallbackModels, in order, each through 1 and 2; a context-length overflow (answered, or
//     certain before sending by every channel's contextWindow) instead switches to the
//     overflowing model's contextOverflowModels (once per request);
//  4. panic routing: the least-bad channels of the requested model, one after the other;
//  5. a clear 503, or a 429 when every attempt was rate limited, or a 400 when no channel could
//     take the request at all.
//
// A 429 whose Retry-After is at most the policy's maxRetryAfterWait and ends before the deadline
// is waited out and the same channel tried again, whatever other channels exist: a short pause
// is cheaper than moving load to a neighbour (the design notes: slow down, do not cut). A 429
// without Retry-After, or with a longer one, moves on like a failure.
//
// Every attempt after the first needs the retry budget of its model's policy, but a failover
// away from a channel the health engine has ejected meanwhile to one it routes (leavesEjected);
// the request's deadline (the first channel's request timeout plus its fallbackRequest timeout)
// bounds every attempt and wait. Attempts are bounded by the requested policy's maxAttempts.
// Every hop stays within what the first policy may reach: another namespace's model only with its
// consent (acceptFallbackFrom), and only channels within the first policy's requireResidency.
// Every hop also stays within what the client may call (SetAllowed): a fallbackModels or
// contextOverflowModels hop to a model outside the client's models is skipped (Skipped names it),
// and when none is left the request ends as it would have without the hop.
//
// A Plan is used by one request at a time; its zero value is not usable (see Start). It keeps its
// scratch slices across Start calls, so a driver that reuses one does not allocate per request.
type Plan struct {
	routes Routes
	health Health
	rand   Rand
	fit    Fit     // nil: every channel fits
	allow  Allowed // nil: every model is allowed

	first   *Model
	listed  bool     // the listed cohort: channels in listed order, health ignored (cohort.go)
	cur     *Model   // the model being walked; nil between hops
	entered bool     // cur's context-window pre-check is done
	hops    []string // the models still to walk after cur
	hop     int
	panicky bool // in panic routing
	done    bool
	final   Step

	attempts   int
	deadline   time.Time
	tried      []health.Key // channel×models that failed this request: a handful at most
	last       *routing.Channel
	lastID     string // last's ID, kept: building one allocates
	lastModel  *Model
	lastOut    health.Outcome
	lastDetail string
	sameAgain  bool // the back-off retry of the only channel was used on cur
	overflowed bool
	unfit      string        // why the last channel passed over could not take the request
	retryAfter time.Duration // the smallest Retry-After seen from 429s
	allLimited bool          // every attempt so far was a 429
	skipped    []string      // hops this request's client may not call, once each

	observed bool   // a Result is waiting to be acted on
	res      Result // that Result
	tryCh    *routing.Channel
	tryID    string
	tryModel *Model
	tryPanic bool
	pending  bool // a Try of pendCh waits for the Wait just returned
	pendCh   *routing.Channel
	pendID   string
	pendMod  *Model

	routesBuf []health.Route
	candsBuf  []health.Candidate
}

// Start begins a request for model, which routes must route (the driver answers "model not
// found" itself), at now. It counts the request in the policy's retry budget.
func (p *Plan) Start(routes Routes, h Health, rnd Rand, now time.Time, model string) {
	*p = Plan{routes: routes, health: h, rand: rnd, tried: p.tried[:0], skipped: p.skipped[:0], routesBuf: p.routesBuf[:0], candsBuf: p.candsBuf[:0]}
	p.first = routes.Model(model)
	p.cur = p.first
	p.hops = p.first.Policy.FallbackModels
	p.allLimited = true
	p.first.Budget.Request(now)
}

// SetRand replaces the plan's randomness for the rest of the request. Replay finishes a request
// whose replayed plan departed from the log on another stream than the one that follows the
// log, so the plans that follow it keep drawing what the logging proxy drew.
func (p *Plan) SetRand(r Rand) { p.rand = r }

// Release drops everything the plan refers to but its scratch, for a driver that pools plans:
// a pooled plan must not keep a request's route (and so an old routing table) alive.
func (p *Plan) Release() {
	clear(p.tried)
	clear(p.skipped)
	clear(p.routesBuf)
	clear(p.candsBuf)
	*p = Plan{tried: p.tried[:0], skipped: p.skipped[:0], routesBuf: p.routesBuf[:0], candsBuf: p.candsBuf[:0]}
}

// SetFit gives the plan the request's capability check (after Start; nil: every channel fits).
func (p *Plan) SetFit(f Fit) { p.fit = f }

// SetAllowed gives the plan the models the request's client may call (after Start; nil: every
// model). The requested model is the driver's to check before Start.
func (p *Plan) SetAllowed(a Allowed) { p.allow = a }

// Skipped are the fallbackModels and contextOverflowModels hops passed over because the client
// may not call them, in the order met. The slice is the plan's scratch: valid until the next
// Start or Release.
func (p *Plan) Skipped() []string { return p.skipped }

// Attempts is the number of attempts handed out so far.
func (p *Plan) Attempts() int { return p.attempts }

// First is the requested model's route.
func (p *Plan) First() *Model { return p.first }

// Observe reports how the attempt of the last Try ended. Call Next for the step after it.
func (p *Plan) Observe(r Result) {
	p.observed, p.res = true, r
}

// Next returns the next step at now.
func (p *Plan) Next(now time.Time) Step {
	if p.done {
		return p.final
	}
	if p.pending {
		p.pending = false
		return p.try(now, p.pendMod, p.pendCh, p.pendID, false, true)
	}
	if p.observed {
		p.observed = false
		if st, decided := p.after(now); decided {
			return st
		}
	}
	maxAttempts := p.first.Policy.Retry.MaxAttempts
	for !p.panicky {
		if p.attempts >= maxAttempts {
			return p.fail(now)
		}
		if p.cur == nil {
			if !p.nextHop() {
				if p.listed {
					return p.fail(now) // every listed channel was tried: no panic routing without health
				}
				p.panicky = true
				break
			}
		}
		mr := p.cur
		if !p.entered {
			p.entered = true
			if !p.overflowed && p.fit != nil && p.fit.OverflowsAll(mr) && p.anyHop(mr.Policy.ContextOverflowModels) {
				// The prompt certainly exceeds every channel's contextWindow: overflow before sending.
				p.overflowed = true
				p.cur, p.hops, p.hop = nil, mr.Policy.ContextOverflowModels, 0
				continue
			}
		}
		ch, id := p.pick(now, mr, false)
		if ch == nil && !p.sameAgain && p.canRetrySame(mr) {
			p.sameAgain = true
			if d := p.backoff(mr.Policy.Retry); now.Add(d).Before(p.deadline) {
				p.pending, p.pendCh, p.pendID, p.pendMod = true, p.last, p.lastID, mr
				return Step{Action: ActionWait, Wait: d}
			}
			// No time left to wait out the back-off: on to the next model.
		}
		if ch == nil {
			p.cur = nil
			continue
		}
		return p.try(now, mr, ch, id, false, false)
	}
	// Panic routing: every channel of the requested model is out; try the least-bad ones anyway,
	// one after the other while attempts remain.
	if p.attempts < maxAttempts && p.first.Policy.PanicRouting && !p.allRateLimited(now, p.first) {
		if ch, id := p.pick(now, p.first, true); ch != nil {
			return p.try(now, p.first, ch, id, true, false)
		}
	}
	return p.fail(now)
}

// after acts on the observed Result of the last Try: it either decides the step (a stop, the
// wait before a same-channel retry after a short Retry-After) or records the failure and lets
// Next walk on.
func (p *Plan) after(now time.Time) (Step, bool) {
	r, ch, id, mr := &p.res, p.tryCh, p.tryID, p.tryModel
	if r.Outcome != health.OutcomeRateLimited {
		p.allLimited = false
	}
	switch r.Outcome {
	case health.OutcomeSuccess:
		return p.stop(Step{Action: ActionStop, Stop: StopAnswered, Attempts: p.attempts, LastChannel: id}), true
	case health.OutcomeClientError:
		if r.ErrCode == CodeContextLengthExceeded && !p.tryPanic && !p.overflowed && p.anyHop(mr.Policy.ContextOverflowModels) {
			p.overflowed = true
			p.cur, p.hops, p.hop = nil, mr.Policy.ContextOverflowModels, 0
			return Step{}, false
		}
		// content_policy_violation, a context overflow with nowhere larger to go, other 4xx:
		// the caller's to fix.
		return p.stop(Step{Action: ActionStop, Stop: StopPassThrough, Attempts: p.attempts, LastChannel: id, Detail: r.Detail}), true
	case health.OutcomeRateLimited:
		if r.RetryAfter > 0 && (p.retryAfter == 0 || r.RetryAfter < p.retryAfter) {
			p.retryAfter = r.RetryAfter
		}
		if r.RetryAfter > 0 && r.RetryAfter <= mr.Policy.Settings.MaxRetryAfterWait &&
			now.Add(r.RetryAfter).Before(p.deadline) && p.attempts < p.first.Policy.Retry.MaxAttempts {
			// A short Retry-After is cheaper to wait out than a failover.
			p.pending, p.pendCh, p.pendID, p.pendMod = true, ch, id, mr
			return Step{Action: ActionWait, Wait: r.RetryAfter}, true
		}
	}
	p.tried = append(p.tried, health.Key{Channel: id, Model: mr.Name})
	p.last, p.lastID, p.lastModel, p.lastOut, p.lastDetail = ch, id, mr, r.Outcome, r.Detail
	return Step{}, false
}

// try hands out one attempt on ch, within the retry budget and the deadline.
func (p *Plan) try(now time.Time, mr *Model, ch *routing.Channel, id string, panicRoute, same bool) Step {
	if p.attempts > 0 && !p.leavesEjected(now, panicRoute, same) && !mr.Budget.AllowRetry(now, mr.Policy.Retry.BudgetPercent) {
		p.lastDetail += " (retry budget exhausted)"
		st := p.fail(now)
		st.BudgetExhausted, st.Model = true, mr
		p.final = st
		return st
	}
	timeout := ch.Timeouts.Request
	if p.attempts == 0 {
		// The request's deadline: the first channel's request timeout plus one fallback's (the
		// design notes' 30 s + 20 s), so that an attempt which ran out its whole request timeout
		// (a non-streamed answer has no first-byte timer) can still fail over once.
		p.deadline = now.Add(timeout + ch.Timeouts.FallbackRequest)
	} else {
		timeout = min(ch.Timeouts.FallbackRequest, p.deadline.Sub(now))
		if timeout <= 0 {
			p.lastDetail += " (request deadline reached)"
			return p.fail(now)
		}
	}
	p.attempts++
	p.tryCh, p.tryID, p.tryModel, p.tryPanic = ch, id, mr, panicRoute
	return Step{Action: ActionTry, Channel: ch, Model: mr, Timeout: timeout, Panic: panicRoute, Same: same}
}

// leavesEjected reports whether the retry about to be handed out moves the request away from a
// channel×model the health engine has taken out of rotation since (Ejected, or on to Probing;
// or an operator's spec.disabled) to one it routes: failover, which the retry budget does not
// charge. The budget guards the providers against retries multiplying the load while a channel
// fails and nobody has judged it yet; once the engine has ejected it, every new request goes to
// the channels left anyway, and the requests that were in flight on it (with a hung provider,
// all of them time out together) take the path the new ones take, at most once per ejected
// channel: that adds no load the ejection did not already move. Charging them let the budget cut
// the tail of one outage (the demo's hung primary: 40 retries at once against a limit of 38).
//
// Everything else is charged as it always was: a retry away from a channel still in rotation
// (failing but not judged: the storm the budget is for), away from one cut by a Retry-After (a
// 429 is a load signal, and one answer sets it, where an ejection takes a trip rule's
// evidence), panic routing (nothing is routable: every retry is load on a failing channel),
// the same channel again, and the listed cohort, which ignores health verdicts.
//
// It reads the engine when the retry is planned: the drivers (proxy, replay, simulate) report
// an attempt to the engine before they report it to the plan, so an ejection that attempt
// caused counts already.
func (p *Plan) leavesEjected(now time.Time, panicRoute, same bool) bool {
	if panicRoute || same || p.listed || p.tryModel == nil {
		return false
	}
	return p.outOfRotation(now, health.Key{Channel: p.tryID, Model: p.tryModel.Name})
}

// outOfRotation reports whether the engine keeps k out of real traffic at now.
func (p *Plan) outOfRotation(now time.Time, k health.Key) bool {
	st, ok := p.health.StatusOf(now, k)
	return ok && st.Phase.OutOfRotation()
}

// AllowContinuation reports whether a continuation of mr's stream, which broke on channel
// broken (the first attempt's, or the last continuation's), may be sent within the retry budget,
// and counts it when the budget is charged. As for a retry (leavesEjected), a continuation away
// from a channel×model the engine has taken out of rotation since is failover and draws
// nothing: Continue picks only routable channels, so it goes where new requests go. Everything
// else is charged: in an outage that breaks every stream, continuations must not double the load
// on the channels left while the one that broke them is still in rotation.
func (p *Plan) AllowContinuation(now time.Time, mr *Model, broken string) bool {
	return p.outOfRotation(now, health.Key{Channel: broken, Model: mr.Name}) || mr.Budget.AllowRetry(now, mr.Policy.Retry.BudgetPercent)
}

// fail ends the request with the answer for "no channel could answer".
func (p *Plan) fail(now time.Time) Step {
	if p.attempts == 0 && p.unfit != "" {
		return p.stop(Step{Action: ActionStop, Stop: StopUnfit, Detail: p.unfit})
	}
	if p.attempts == 0 && p.allRateLimited(now, p.first) {
		p.retryAfter = p.pendingRetryAfter(now, p.first)
	}
	if p.allLimited && (p.attempts > 0 || p.retryAfter > 0) {
		return p.stop(Step{Action: ActionStop, Stop: StopRateLimited, RetryAfter: p.retryAfter, Attempts: p.attempts})
	}
	st := Step{Action: ActionStop, Stop: StopUnavailable, Attempts: p.attempts, Detail: p.lastDetail}
	st.LastChannel = p.lastID
	return p.stop(st)
}

func (p *Plan) stop(st Step) Step {
	p.done, p.final = true, st
	return st
}

// nextHop moves cur to the next model of the chain this request may reach.
func (p *Plan) nextHop() bool {
	for p.hop < len(p.hops) {
		mr := p.routes.Model(p.hops[p.hop])
		p.hop++
		if mr != nil && p.reachable(mr) {
			p.cur, p.sameAgain, p.entered = mr, false, false
			return true
		}
	}
	return false
}

// pick returns the next channel to try for a model: the engine's order, skipping channels tried
// already, preferring one in another failure domain than the channel that just failed. id is
// the channel's ID as the candidates name it.
func (p *Plan) pick(now time.Time, mr *Model, panicRouting bool) (ch *routing.Channel, id string) {
	if p.listed {
		return p.pickListed(now, mr)
	}
	rnd := p.rand.Float64()
	cands := mr.Candidates
	if panicRouting {
		// The engine names one least-bad channel; leave out those this request already tried.
		cands = p.untried(mr)
	}
	p.routesBuf = p.health.Select(now, mr.Name, cands, mr.Strategy, panicRouting, rnd, p.routesBuf)
	var fallback *routing.Channel
	var fallbackID string
	for _, route := range p.routesBuf {
		if panicRouting && !route.Panic {
			return nil, "" // something is routable after all: not a panic
		}
		ch, why := p.usable(route.Channel, mr.Name)
		if ch == nil {
			if why != "" {
				p.unfit = why
			}
			continue
		}
		if p.last == nil || ch.Domain.Differs(p.last.Domain) {
			return ch, route.Channel
		}
		if fallback == nil {
			fallback, fallbackID = ch, route.Channel
		}
	}
	return fallback, fallbackID
}

// hopAllowed reports whether this request may be routed to mr's model. The traffic belongs to the
// team of the first policy however many hops it took to get here, so consent is asked of mr's
// policy for the first policy's namespace, not for the namespace of the policy that named the
// hop: team-b accepting team-a must not let team-a's traffic through to a team-c that accepts
// only team-b. The requested model itself is the first policy's own.
//
// Compile reports a fallback without consent as a problem on the policy that names it, but the
// planner must enforce it itself: a policy with a problem keeps serving its last good form,
// consent may be withdrawn after it was given, and a hop named by a fallback model's own policy
// (its contextOverflowModels) is not the first policy's to compile.
func (p *Plan) hopAllowed(mr *Model) bool {
	return mr.Policy.AcceptsFallbackFrom(p.first.Policy.Namespace)
}

// reachable reports whether this request may hop to mr: by the policies' consent (hopAllowed)
// and by its client's models. A hop the client may not call is recorded in skipped; one refused
// by consent is the configuration's business, already reported by Compile.
func (p *Plan) reachable(mr *Model) bool {
	if !p.hopAllowed(mr) {
		return false
	}
	if p.allow != nil && !p.allow.Allows(mr.Name) {
		if !slices.Contains(p.skipped, mr.Name) {
			p.skipped = append(p.skipped, mr.Name)
		}
		return false
	}
	return true
}

// anyHop reports whether some model of a fallback list is routed and reachable by this request.
func (p *Plan) anyHop(models []string) bool {
	for _, m := range models {
		if mr := p.routes.Model(m); mr != nil && p.reachable(mr) {
			return true
		}
	}
	return false
}

// resident reports whether ch may serve this request: the first policy's requireResidency binds
// every hop, panic routing included. (A policy's own candidates are filtered by Compile; a
// fallback model's are filtered by its own policy's requireResidency only, and a policy kept in
// its last good form may list a channel whose residency has changed since.)
func (p *Plan) resident(ch *routing.Channel) bool {
	want := p.first.Policy.RequireResidency
	return len(want) == 0 || slices.Contains(want, ch.Residency)
}

func (p *Plan) wasTried(k health.Key) bool { return slices.Contains(p.tried, k) }

// usable returns the candidate channel id if this request may still try it for model: not tried
// yet, in the table, resident, and fit for the request. When only fit rules it out, why says so
// (the callers that pick record it for the 400 of a request nothing can take).
func (p *Plan) usable(id, model string) (ch *routing.Channel, why string) {
	if p.wasTried(health.Key{Channel: id, Model: model}) {
		return nil, ""
	}
	if ch = p.routes.Channel(id); ch == nil || !p.resident(ch) {
		return nil, ""
	}
	if p.fit != nil {
		if why = p.fit.Unfit(ch, model); why != "" {
			return nil, why
		}
	}
	return ch, ""
}

// untried are the candidates panic routing may still name: not tried by this request, and
// resident (the engine picks one least-bad channel; it must pick among those that may serve).
func (p *Plan) untried(mr *Model) []health.Candidate {
	out := p.candsBuf[:0]
	for _, c := range mr.Candidates {
		if ch, _ := p.usable(c.Channel, mr.Name); ch != nil {
			out = append(out, c)
		}
	}
	p.candsBuf = out
	return out
}

// canRetrySame: the same channel again only when it is the model's only candidate and its
// failure was not a timeout (a silent provider must cost one timeout, not a chain of them) nor a
// 429 (a short Retry-After was waited out already; a long or missing one is not retried).
func (p *Plan) canRetrySame(mr *Model) bool {
	return p.last != nil && p.lastModel == mr && len(mr.Candidates) == 1 &&
		p.lastOut != health.OutcomeTimeout && p.lastOut != health.OutcomeRateLimited
}

// backoff is the jittered exponential delay before retrying the same channel: base ×
// 2^(attempts-1), capped at max, then drawn uniformly from [d/2, d] (so never above the cap).
func (p *Plan) backoff(r routing.Retry) time.Duration {
	return Backoff(r, p.attempts, p.rand.Float64())
}

// Backoff is the back-off before the retry that follows attempt number attempts (1 for the
// first), with u uniform in [0, 1): base × 2^(attempts-1) capped at r.BackoffMax, then
// d/2 + u × d/2.
func Backoff(r routing.Retry, attempts int, u float64) time.Duration {
	d := r.BackoffMax
	if shift := max(attempts-1, 0); shift < 62 {
		if b := r.BackoffBase << shift; b > 0 && b < d {
			d = b
		}
	}
	return d/2 + time.Duration(u*float64(d/2))
}

// allRateLimited reports whether every candidate of the model waits out a Retry-After.
func (p *Plan) allRateLimited(now time.Time, mr *Model) bool {
	if len(mr.Candidates) == 0 {
		return false
	}
	for _, c := range mr.Candidates {
		st, ok := p.health.StatusOf(now, health.Key{Channel: c.Channel, Model: mr.Name})
		if !ok || st.Phase != health.PhaseRateLimited || !st.RetryAfterUntil.After(now) {
			return false
		}
	}
	return true
}

func (p *Plan) pendingRetryAfter(now time.Time, mr *Model) time.Duration {
	var least time.Duration
	for _, c := range mr.Candidates {
		if st, ok := p.health.StatusOf(now, health.Key{Channel: c.Channel, Model: mr.Name}); ok {
			if d := st.RetryAfterUntil.Sub(now); d > 0 && (least == 0 || d < least) {
				least = d
			}
		}
	}
	return least
}
