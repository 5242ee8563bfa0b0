package replay

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Defaults of Options.
const (
	DefaultReorderTolerance = 5 * time.Second
	DefaultEvidenceWindow   = 10 * time.Second
	DefaultMaxProblems      = 20
	// requestLinger is how long after its first attempt a request waits for more attempts with
	// the same requestId before it is scored; later ones start a new request.
	requestLinger = 60 * time.Second
	// maxEventsPerKey bounds the events kept per channel×model in the report; the counts and the
	// incident scoring still see every transition.
	maxEventsPerKey = 1000
)

// Options tune a replay. The zero value means the documented defaults.
type Options struct {
	// ReorderTolerance: lines up to this much older than the newest line seen are sorted into
	// place; older ones are reported and skipped.
	ReorderTolerance time.Duration
	// EvidenceWindow: how far from a request's time a channel's logged attempts count as evidence
	// of what that channel would have answered (see docs/replay.md).
	EvidenceWindow time.Duration
	// Seed drives the random draws of Select (Weighted strategy, ramp share draws).
	Seed uint64
	// MaxProblems bounds the input problems listed per kind; all are counted.
	MaxProblems int
	// Incidents are known real outages to score the policy against.
	Incidents []Incident
	// Rand, when set, gives the failover planner its randomness for one replayed request, by its
	// request id (see docs/replay.md); by default every request draws from one stream seeded by
	// Seed. A test that gives the proxy the same function gets the same draws for every request.
	Rand func(requestID string) failover.Rand
	// Trace, when set, receives every attempt of the replayed policy, in the order they are
	// decided (a request that departs from the log is finished, and traced, at the end of its
	// linger).
	Trace func(TracedAttempt)
	// Observer, when set, sees every accepted line, journal transition and scored request (see
	// Observer).
	Observer Observer
	// Since, when set, skips the lines stamped before it (counted in LogSummary.BeforeSince):
	// the engine starts Healthy at the first line at or after it.
	Since time.Time
}

// TracedAttempt is one attempt of the replayed policy.
type TracedAttempt struct {
	RequestID string
	Number    int // 1 for a request's first attempt
	At        time.Time
	Channel   string
	Model     string
	Outcome   health.Outcome
	// Source of the outcome: "log" (the request's own logged attempt), "evidence" (the
	// channel's logged attempt nearest in time) or "assumed" (no evidence).
	Source string
	// Continuation numbers an attempt that continued a stream broken after text reached the
	// client, as the access log does (0: none); Number then counts on from the request's tries.
	Continuation int
}

func (o *Options) defaults() {
	if o.ReorderTolerance <= 0 {
		o.ReorderTolerance = DefaultReorderTolerance
	}
	if o.EvidenceWindow <= 0 {
		o.EvidenceWindow = DefaultEvidenceWindow
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.MaxProblems <= 0 {
		o.MaxProblems = DefaultMaxProblems
	}
}

// entry is one decoded attempt waiting in the reorder buffer.
type entry struct {
	ts         int64
	line       int64
	key        int32
	attempt    int32
	outcome    health.Outcome
	latency    time.Duration
	retryAfter time.Duration
	reqID      string
	requested  int32 // the model index the client asked for; -1 when it is the key's own
	probe      bool
	overflow   bool // a context_length_exceeded 400
	committed  bool // a stream cut after its first event reached the client: no failover
	timedOut   bool // the attempt ended on a timeout (a stalled stream's outcome is stream_cut)
	// continuation: the attempt continued a stream the proxy recovered (its number, 0: none).
	continuation int32
	// cohortKey is the logged X-Switchyard-Cohort ("": the request id decides the cohort).
	cohortKey string
}

// evidence is one logged attempt kept for the failover model.
type evidence struct {
	ts      int64
	line    int64
	outcome health.Outcome
}

type keyState struct {
	key   health.Key
	model int
	cand  int              // index in the model's candidates
	ch    *routing.Channel // the compiled channel, as the planner names it

	phase   health.Phase
	since   int64
	phaseNs [numPhases]int64
	logged  [numPhases]int64
	carried [numPhases]int64
	rampAcc float64

	cooldownUntil int64
	probePending  bool
	probeAt       int64
	probes        ProbeReport

	events        []EventReport
	eventsOmitted int
	ejections     []ejection
	out           []interval // stretches out of rotation (Ejected, Probing, Disabled)
	outStart      int64
	isOut         bool

	ev     []evidence // logged attempts of the last requestLinger+EvidenceWindow, oldest first
	evHead int

	req RequestReport
}

const numPhases = int(health.PhaseDisabled) + 1

type ejection struct {
	at              int64
	reason, message string
}

type interval struct{ from, to int64 }

type attemptRec struct {
	key      int32
	line     int64
	outcome  health.Outcome
	retry    time.Duration
	overflow bool
	timedOut bool // a timeout, also when its outcome is stream_cut (a stall after text was sent)
	used     bool // the replayed plan took this attempt's outcome already
}

// request is one client request as the replayed policy walks it. The planner follows the log
// (live) as long as it asks for the attempts the log has, in their order: then it decides with
// the engine's state of the moment, exactly as the logging proxy did if the policy is the same.
// Once it departs from the log, it is finished at the end of its linger from evidence.
type request struct {
	id       string
	t0       int64
	model    int
	firstKey int32 // the key of the plan's first attempt; -1 for none
	lastKey  int32 // the key of the plan's latest attempt; -1 for none
	attempts []attemptRec

	plan    failover.Plan
	step    failover.Step // the plan's step after the last one followed
	stepAt  int64         // when step was decided; for a Wait, when it ends
	live    bool
	ended   bool // step is the plan's Stop
	ok      bool // ended with an answer
	cut     bool // ended by a stream cut after its first event (the log says so)
	assumed bool

	continued int32 // the number of the latest continuation followed (0: none)
	contKey   int32 // its key
}

// chKey finds a key from the planner's channel and model without building an ID.
type chKey struct {
	ch    *routing.Channel
	model string
}

type replayer struct {
	// bareNS: for a channel the manifests name without a namespace, the namespace log lines
	// name it with (see namespacedLine).
	bareNS map[string]string
	setup  *Setup
	opts   Options
	eng    *health.Engine
	rng    *rand.Rand
	prng   failover.Rand // the planner's draws for requests that follow the log

	fmodels  []failover.Model // per setup model: the planner's route, with this run's budgets
	targets  []health.Target  // the engine's keys, configured at the first line's time
	channels map[string]*routing.Channel
	keyByCh  map[chKey]int32

	keys     []*keyState
	byName   map[string]map[string]int32 // channel → model → key index
	modelIdx map[string]int
	models   []RequestReport
	modelKey [][]int32 // model → candidate index → key index

	started   bool
	first     int64
	clock     int64
	seq       uint64
	nextCheck int64
	maxPML    time.Duration

	scratch []health.Route
	due     []health.Key

	pending map[string]*request
	spare   []*request // resolved requests, reused with their plans' scratch
	queue   []*request
	qHead   int

	sum      LogSummary
	problems []Problem
	perKind  map[string]int
	unknown  map[string]bool
}

// Run replays an access log against setup and returns the report. It reads the log once, in one
// pass, with memory bounded by the traffic of the reorder tolerance and the request linger, not by
// the log's size. ctx is checked between lines.
func Run(ctx context.Context, setup *Setup, log io.Reader, opts Options) (*Report, error) {
	opts.defaults()
	r := newReplayer(setup, opts)
	lr := newLineReader(log)
	var heap entryHeap
	var raw rawLine
	var maxTS, since int64
	if !opts.Since.IsZero() {
		since = opts.Since.UnixNano()
	}
	seen := false
	for i := 0; ; i++ {
		if i&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		line, tooLong, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read log: %w", err)
		}
		n := lr.n
		if tooLong {
			r.sum.Lines++
			r.problem(n, KindMalformed, fmt.Sprintf("line longer than %d bytes", maxLineBytes))
			continue
		}
		if len(trimSpace(line)) == 0 {
			continue
		}
		r.sum.Lines++
		if err := decodeLine(line, &raw); err != nil {
			r.problem(n, KindMalformed, err.Error())
			continue
		}
		if since != 0 && raw.ts < since {
			r.sum.BeforeSince++
			continue
		}
		k, ok := r.byName[string(raw.channel)][string(raw.model)]
		if !ok {
			k, ok = r.namespacedLine(string(raw.channel), string(raw.model))
		}
		if !ok {
			r.unknownKey(n, raw.channel, raw.model)
			continue
		}
		if seen && raw.ts < maxTS-int64(opts.ReorderTolerance) {
			r.problem(n, KindOutOfOrder, fmt.Sprintf("timestamp %s is %s older than line(s) already read (tolerance %s); skipped",
				time.Unix(0, raw.ts).UTC().Format(time.RFC3339Nano), time.Duration(maxTS-raw.ts), opts.ReorderTolerance))
			continue
		}
		if seen && raw.ts < maxTS {
			r.sum.Reordered++
		}
		if !seen || raw.ts > maxTS {
			maxTS, seen = raw.ts, true
		}
		requested := int32(-1)
		if len(raw.requested) > 0 {
			if mi, ok := r.modelIdx[string(raw.requested)]; ok {
				requested = int32(mi)
			}
		}
		heap.push(entry{ts: raw.ts, line: n, key: k, attempt: int32(raw.attempt), outcome: raw.outcome, requested: requested,
			latency: raw.latency, retryAfter: raw.retryAfter, reqID: string(raw.requestID), probe: raw.probe,
			overflow: raw.overflow, committed: raw.outcome == health.OutcomeStreamCut && raw.stream && raw.ttft > 0,
			timedOut:     raw.outcome == health.OutcomeTimeout || raw.timedOut,
			continuation: int32(raw.continuation), cohortKey: string(raw.cohortKey)})
		for len(heap) > 0 && heap[0].ts <= maxTS-int64(opts.ReorderTolerance) {
			e := heap.pop()
			r.process(&e)
		}
	}
	for len(heap) > 0 {
		e := heap.pop()
		r.process(&e)
	}
	return r.finish(), nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func newReplayer(setup *Setup, opts Options) *replayer {
	r := &replayer{
		setup: setup, opts: opts,
		eng:       health.NewEngine(4096),
		rng:       rand.New(rand.NewPCG(opts.Seed, 0x5eed)),
		byName:    map[string]map[string]int32{},
		modelIdx:  map[string]int{},
		models:    make([]RequestReport, len(setup.Models)),
		modelKey:  make([][]int32, len(setup.Models)),
		pending:   map[string]*request{},
		perKind:   map[string]int{},
		unknown:   map[string]bool{},
		nextCheck: math.MaxInt64,
		fmodels:   make([]failover.Model, len(setup.Models)),
		channels:  map[string]*routing.Channel{},
		keyByCh:   map[chKey]int32{},
	}
	r.prng = rand.New(rand.NewPCG(opts.Seed, 0x91a2))
	for i := range setup.table.Channels {
		ch := &setup.table.Channels[i]
		r.channels[ch.ID()] = ch
	}
	// The proxy's routes and health targets (operator overrides, DryRun), with this run's budgets.
	routes := failover.BuildRoutes(failover.RouteInputs{Table: setup.table})
	byModel := make(map[string]*failover.Model, len(routes.Models))
	for i := range routes.Models {
		byModel[routes.Models[i].Name] = &routes.Models[i]
	}
	for mi := range setup.Models {
		r.fmodels[mi] = *byModel[setup.Models[mi].Model]
	}
	r.targets = routes.Targets
	for mi := range setup.Models {
		m := &setup.Models[mi]
		r.modelIdx[m.Model] = mi
		r.maxPML = max(r.maxPML, m.Settings.ProbeMaxLatency)
		for ci, c := range m.Candidates {
			if r.byName[c.Channel] == nil {
				r.byName[c.Channel] = map[string]int32{}
			}
			r.byName[c.Channel][m.Model] = int32(len(r.keys))
			r.modelKey[mi] = append(r.modelKey[mi], int32(len(r.keys)))
			ch := r.channels[c.Channel]
			r.keyByCh[chKey{ch, m.Model}] = int32(len(r.keys))
			r.keys = append(r.keys, &keyState{key: health.Key{Channel: c.Channel, Model: m.Model}, model: mi, cand: ci, ch: ch})
		}
	}
	// A channel is namespace/name in the access log; logs of standalone proxies, and of versions
	// before channels were namespaced, name it alone. A name that only one namespace uses finds it.
	byShortName := map[string][]string{}
	for id := range r.byName {
		if _, name := routing.SplitChannelID(id); name != id {
			byShortName[name] = append(byShortName[name], id)
		}
	}
	for name, ids := range byShortName {
		if _, taken := r.byName[name]; !taken && len(ids) == 1 {
			r.byName[name] = r.byName[ids[0]]
		}
	}
	return r
}

// namespacedLine finds the key of a line that names a channel namespace/name (a cluster proxy's
// log) when the policy's manifests give the channel no namespace (applied with kubectl -n): by
// its name, as long as the log names it from one namespace only.
func (r *replayer) namespacedLine(channel, model string) (int32, bool) {
	ns, name := routing.SplitChannelID(channel)
	if ns == "" || strings.Contains(name, "/") {
		return 0, false
	}
	k, ok := r.byName[name][model]
	if !ok || r.keys[k].key.Channel != name {
		return 0, false // no such channel, or name is itself an alias of a namespaced one
	}
	if r.bareNS == nil {
		r.bareNS = map[string]string{}
	}
	if seen, has := r.bareNS[name]; has && seen != ns {
		return 0, false
	}
	r.bareNS[name] = ns
	return k, true
}

func (r *replayer) keyOf(k health.Key) *keyState {
	return r.keys[r.byName[k.Channel][k.Model]]
}

// start configures the engine at the first line's time: every key starts Healthy then (a
// disabled one is Disabled at once, as the journal's first event for it says).
func (r *replayer) start(t int64) {
	r.started, r.first, r.clock = true, t, t
	for _, ks := range r.keys {
		ks.phase, ks.since = health.PhaseHealthy, t
	}
	r.eng.Configure(tm(t), r.targets)
	r.drain(t)
}

func tm(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// process replays one attempt, in timestamp order.
func (r *replayer) process(e *entry) {
	if !r.started {
		r.start(e.ts)
	}
	t := max(e.ts, r.clock)
	r.advanceClock(t)
	r.clock = t
	r.sum.Attempts++
	ks := r.keys[e.key]
	m := &r.setup.Models[ks.model]

	// The routing decision for a new request is taken before its first attempt's result is known.
	// A logged probe is the logging proxy's own check, not a client request.
	var req *request
	if e.reqID != "" && !e.probe {
		req = r.pending[e.reqID]
	}
	if e.probe {
		r.sum.Probes++
	} else if req == nil && e.continuation > 0 {
		// A continuation of a request already decided: evidence about its channel, no request.
	} else if req == nil {
		req = r.newRequest()
		*req = request{id: e.reqID, t0: t, model: ks.model, firstKey: -1, lastKey: -1, live: true, attempts: req.attempts[:0], plan: req.plan}
		if e.requested >= 0 {
			// The first logged attempt is already on a fallback or overflow model.
			req.model = int(e.requested)
		}
		rnd := r.prng
		if r.opts.Rand != nil {
			rnd = r.opts.Rand(e.reqID)
		}
		req.plan.Start(r, r.eng, rnd, tm(t), r.setup.Models[req.model].Model)
		if pol := req.plan.First().Policy; pol.Rollout != nil {
			// The cohort the proxy would put the request in under the replayed rollout.
			req.plan.SetCohort(failover.ChooseCohort(pol, cohortKey(e)))
		}
		r.setStep(req, req.plan.Next(tm(t)), t)
		if req.step.Action == failover.ActionTry {
			req.firstKey = r.keyOfStep(&req.step)
		}
		r.drain(t)
		if e.reqID != "" {
			r.pending[e.reqID] = req
		}
		r.queue = append(r.queue, req)
		r.sum.Requests++
	}
	followed := false
	if req != nil {
		req.attempts = append(req.attempts, attemptRec{key: e.key, line: e.line, outcome: e.outcome, retry: e.retryAfter, overflow: e.overflow, timedOut: e.timedOut})
		if e.continuation > 0 {
			followed = r.continued(req, e, t)
		} else {
			followed = r.follow(req, e, t)
		}
	}

	st, _ := r.eng.StatusOf(tm(t), ks.key)
	r.drain(t)
	phase := st.Phase
	// Whether the line answers a pending probe and whether it is traffic the replayed policy
	// sent are two questions: a channel in Probing that panic routing (or the listed cohort)
	// sends requests to gets those requests and its probes, as in the proxy. A line that is both
	// is the evidence of what the probe got, and is fed twice: as the request, then as the probe.
	probe := phase == health.PhaseProbing && ks.probePending && t <= ks.probeAt+int64(m.Settings.ProbeMaxLatency) &&
		e.outcome != health.OutcomeClientError
	fed := false
	switch {
	case followed && (phase != health.PhaseRampingUp || req.plan.Cohort() == failover.CohortListed):
		// The replayed plan sent this very attempt (panic routing's pick and the listed
		// cohort's, whatever the phase, included). A ramp's share is the accumulator's below
		// for every line of the policy's cohort alike: feeding the lines the plan picked on top
		// of it would count the share twice. The listed cohort takes no share: all of its
		// attempts reach the channel, as in the proxy.
		fed = true
	case probe:
	case e.probe: // answers a replayed probe or nothing: the replayed policy sent no such attempt
	case st.TrafficPercent > 0 && phase != health.PhaseRampingUp: // Healthy, Degraded, RateLimited
		fed = true
	case st.TrafficPercent > 0: // RampingUp: the step's share, unless nothing else could take the rest
		if r.onlyRoutable(t, ks) {
			fed = true
		} else {
			ks.rampAcc += float64(st.TrafficPercent) / 100
			if ks.rampAcc >= 1 {
				ks.rampAcc--
				fed = true
			}
		}
	default: // out of rotation: only panic routing would have sent it here
		fed = r.panicTo(t, ks)
	}
	ks.logged[phase]++
	// Before the engine sees it: the transitions this line causes come after it.
	if o := r.opts.Observer; o != nil {
		o.Attempt(LoggedAttempt{At: tm(t), Line: e.line, RequestID: e.reqID, Channel: ks.key.Channel, Model: ks.key.Model,
			Attempt: int(e.attempt), Outcome: e.outcome, Latency: e.latency, Probe: e.probe, Carried: fed || probe})
	}
	if fed || probe {
		ks.carried[phase]++
	}
	if fed {
		// In Probing this only fills the window: the engine takes probe verdicts from probes.
		r.eng.Observe(ks.key, health.Observation{At: tm(t), Outcome: e.outcome, Latency: e.latency, RetryAfter: e.retryAfter})
		r.drain(t)
	}
	if probe {
		ks.probePending = false
		ks.probes.Answered++
		r.eng.Observe(ks.key, health.Observation{At: tm(t), Outcome: e.outcome, Latency: e.latency, RetryAfter: e.retryAfter, Probe: true})
		r.drain(t)
	}
	r.addEvidence(ks, evidence{ts: t, line: e.line, outcome: e.outcome})
	if followed && e.continuation == 0 {
		r.advance(req, e, t)
	}
	r.resolveUpTo(t)
}

// cohortKey is what decides a replayed request's rollout cohort, as in the proxy: the logged
// X-Switchyard-Cohort, else the request id. A line without either (not the proxy's: it always
// logs a request id) is a request of its own, keyed by its line number.
func cohortKey(e *entry) string {
	switch {
	case e.cohortKey != "":
		return e.cohortKey
	case e.reqID != "":
		return e.reqID
	}
	return "line-" + strconv.FormatInt(e.line, 10)
}

// continued takes a logged continuation of a request whose stream was cut after text reached
// the client: under a replayed policy that recovers streams (streamRecovery Continue, and this
// many continuations allowed) the proxy would have sent it too, so it is followed (the engine
// observes it, as the proxy's did) and its success is the request's; otherwise it is evidence
// only and the request stays cut. A continuation after one that was not followed is not either
// (where the replayed planner sent the first, the log does not say), and each one followed
// draws on the retry budget of the model whose stream broke, as in the proxy: one the budget
// refuses was not sent.
func (r *replayer) continued(req *request, e *entry, t int64) bool {
	p := r.setup.Models[req.model].policy
	if !req.cut || p == nil || p.StreamRecovery != "Continue" || int(e.continuation) > p.MaxContinuations {
		return false
	}
	// A continuation whose prefill was refused is tried again under the same number.
	if e.continuation > req.continued+1 || e.continuation == 1 && !r.continuesOn(req, e, t) {
		return false
	}
	mr := r.Model(r.setup.Models[r.keys[e.key].model].Model)
	from := req.lastKey // the attempt whose stream broke, or the latest continuation
	if req.continued > 0 {
		from = req.contKey
	}
	if mr == nil || from < 0 || !req.plan.AllowContinuation(tm(t), mr, r.keys[from].key.Channel) {
		return false
	}
	req.continued, req.contKey = e.continuation, e.key
	if e.outcome == health.OutcomeSuccess {
		req.ok, req.cut = true, false
	}
	if r.opts.Trace != nil {
		ks := r.keys[e.key]
		r.opts.Trace(TracedAttempt{RequestID: req.id, Number: req.plan.Attempts() + int(e.continuation), At: tm(t), Channel: ks.key.Channel, Model: ks.key.Model,
			Outcome: e.outcome, Source: "log", Continuation: int(e.continuation)})
	}
	return true
}

// continuesOn reports whether the replayed planner would send a request's first continuation
// where the log's went (failover.Plan.Continue, on the replayed health): a policy that disables
// or ejects that channel, or puts it outside requireResidency, leaves the stream cut. The log
// carries no request bodies, so every channel counts as fit and splicing as allowed, and a
// continuation after the first (whose channel also depends on prefill refusals the log does not
// show) is taken as logged. The draw is the request's own (Options.Rand), as the proxy's is; 0
// without one, so that replay's shared stream is not shifted.
func (r *replayer) continuesOn(req *request, e *entry, t int64) bool {
	ks := r.keys[e.key]
	mr := r.Model(r.setup.Models[ks.model].Model)
	if mr == nil || req.plan.First() == nil {
		return false
	}
	var draw float64
	if r.opts.Rand != nil {
		draw = r.opts.Rand(e.reqID).Float64()
	}
	failed := func(id string) (bool, bool) {
		var f, timedOut bool
		for _, a := range req.attempts[:len(req.attempts)-1] { // the continuation's own outcome came after
			if k := r.keys[a.key].key; k.Channel == id && a.outcome != health.OutcomeSuccess {
				f, timedOut = true, timedOut || a.timedOut
			}
		}
		return f, timedOut
	}
	ch, _ := req.plan.Continue(failover.ContinueInput{Now: tm(t), Model: mr, Draw: draw, Failed: failed, SpliceOK: true})
	return ch != nil && ch.ID() == ks.key.Channel
}

// newRequest returns a resolved request to reuse, or a new one.
func (r *replayer) newRequest() *request {
	if n := len(r.spare); n > 0 {
		req := r.spare[n-1]
		r.spare = r.spare[:n-1]
		return req
	}
	return &request{}
}

// Model and Channel make the replayer the planner's failover.Routes.
func (r *replayer) Model(name string) *failover.Model {
	if mi, ok := r.modelIdx[name]; ok {
		return &r.fmodels[mi]
	}
	return nil
}

func (r *replayer) Channel(id string) *routing.Channel { return r.channels[id] }

func (r *replayer) keyOfStep(st *failover.Step) int32 {
	if k, ok := r.keyByCh[chKey{st.Channel, st.Model.Name}]; ok {
		return k
	}
	return -1
}

func (r *replayer) setStep(req *request, st failover.Step, t int64) {
	req.step, req.stepAt = st, t
	switch st.Action {
	case failover.ActionWait:
		req.stepAt = t + int64(st.Wait)
	case failover.ActionStop:
		req.ended, req.ok = true, st.Stop == failover.StopAnswered
	}
}

// follow reports whether the logged attempt e is the one the request's plan asks for next.
func (r *replayer) follow(req *request, e *entry, t int64) bool {
	if !req.live {
		return false
	}
	if req.step.Action == failover.ActionWait {
		// The proxy asked again once the wait was over; nothing of this request happened between.
		r.setStep(req, req.plan.Next(tm(req.stepAt)), req.stepAt)
		r.drain(t)
	}
	if req.step.Action != failover.ActionTry || r.keyOfStep(&req.step) != e.key {
		req.live = false // the log goes on where the plan would not, or elsewhere: evidence decides
		return false
	}
	a := &req.attempts[len(req.attempts)-1]
	a.used = true
	req.lastKey = e.key
	r.trace(req, req.stepAt, e.key, e.outcome, "log")
	return true
}

// advance tells the plan how the attempt it asked for ended, as the proxy does once the engine
// has observed it, and takes the next step.
func (r *replayer) advance(req *request, e *entry, t int64) {
	if e.outcome == health.OutcomeStreamCut && e.committed {
		// Bytes went to the client: the proxy ends the request without asking the planner.
		req.ended, req.ok, req.cut = true, false, true
		req.step = failover.Step{Action: failover.ActionStop, Stop: failover.StopUnavailable}
		return
	}
	res := failover.Result{Outcome: e.outcome, RetryAfter: e.retryAfter}
	if e.overflow {
		res.ErrCode = failover.CodeContextLengthExceeded
	}
	req.plan.Observe(res)
	r.setStep(req, req.plan.Next(tm(t)), t)
	r.drain(t)
}

func (r *replayer) trace(req *request, t int64, k int32, o health.Outcome, source string) {
	if r.opts.Trace == nil {
		return
	}
	ks := r.keys[k]
	r.opts.Trace(TracedAttempt{RequestID: req.id, Number: req.plan.Attempts(), At: tm(t), Channel: ks.key.Channel, Model: ks.key.Model, Outcome: o, Source: source})
}

// onlyRoutable reports whether ks is the only routable candidate of its model at t.
func (r *replayer) onlyRoutable(t int64, ks *keyState) bool {
	m := &r.setup.Models[ks.model]
	routes := r.eng.Select(tm(t), m.Model, m.Candidates, m.Strategy, m.PanicRouting, r.rng.Float64(), r.scratch[:0])
	r.scratch = routes
	r.drain(t)
	return len(routes) == 1 && routes[0].Channel == ks.key.Channel
}

// panicTo reports whether panic routing sends the model's traffic to ks at t.
func (r *replayer) panicTo(t int64, ks *keyState) bool {
	m := &r.setup.Models[ks.model]
	if !m.PanicRouting {
		return false
	}
	routes := r.eng.Select(tm(t), m.Model, m.Candidates, m.Strategy, true, r.rng.Float64(), r.scratch[:0])
	r.scratch = routes
	r.drain(t)
	return len(routes) == 1 && routes[0].Panic && routes[0].Channel == ks.key.Channel
}

// advanceClock runs the probe schedule up to t: ProbesDue at the end of every cooldown and then
// every second while a key is Probing. The engine stamps every transition with its own due time,
// so this only decides when probes are handed out, never what the journal says.
func (r *replayer) advanceClock(t int64) {
	slack := int64(r.maxPML) + int64(2*time.Second)
	for r.nextCheck <= t {
		c := max(r.nextCheck, r.clock)
		// Across a gap in the log nothing can answer a probe handed out more than the longest probe
		// latency before the next line: skip to there instead of stepping through the gap.
		if t-c > slack {
			c = t - slack
		}
		r.check(c)
	}
}

func (r *replayer) check(c int64) {
	r.due = r.eng.ProbesDue(tm(c), r.due[:0])
	r.drain(c)
	for _, k := range r.due {
		ks := r.keyOf(k)
		if ks.probePending {
			ks.probes.Unanswered++
		}
		ks.probePending, ks.probeAt = true, c
		ks.probes.Issued++
	}
	r.schedule(c)
}

// schedule sets the next probe check after c.
func (r *replayer) schedule(c int64) {
	next := int64(math.MaxInt64)
	for _, ks := range r.keys {
		switch ks.phase {
		case health.PhaseProbing:
			next = min(next, c+int64(time.Second))
		case health.PhaseEjected:
			if ks.cooldownUntil > c {
				next = min(next, ks.cooldownUntil)
			} else {
				next = min(next, c+int64(time.Second))
			}
		}
	}
	r.nextCheck = next
}

// drain reads new journal events and keeps each key's phase bookkeeping. now is the time of the
// engine call that produced them.
func (r *replayer) drain(now int64) {
	for range 1000 { // a status read below can surface more events; it settles at once
		evs := r.eng.Events(r.seq)
		if len(evs) == 0 {
			return
		}
		changed := false
		for i := range evs {
			ev := &evs[i]
			r.seq = ev.Seq
			ks := r.keyOf(health.Key{Channel: ev.Channel, Model: ev.Model})
			at := ev.At.UnixNano()
			if strings.HasPrefix(ev.Reason, health.DryRunPrefix) {
				// A DryRun policy's shadow: the report lists what its rules would do, but the
				// key's phase, its ejections and the observer's transitions are the live
				// verdicts only, as in the proxy.
				ks.recordEvent(ev, at)
				continue
			}
			if len(ks.events) < maxEventsPerKey {
				ks.events = append(ks.events, EventReport{At: formatTS(at), From: ev.From.String(), To: ev.To.String(),
					Reason: ev.Reason, Actor: ev.Actor, Message: ev.Message})
			} else {
				ks.eventsOmitted++
			}
			if ev.NewEjection() {
				ks.ejections = append(ks.ejections, ejection{at: at, reason: ev.Reason, message: ev.Message})
			}
			if ev.From != ev.To {
				if o := r.opts.Observer; o != nil {
					o.Transition(Transition{At: ev.At.UTC(), Channel: ev.Channel, Model: ev.Model, From: ev.From, To: ev.To,
						Reason: ev.Reason, Message: ev.Message})
				}
				ks.setPhase(ev.To, at)
				changed = true
				if ev.To == health.PhaseEjected {
					if st, ok := r.eng.StatusOf(tm(max(now, at)), ks.key); ok && st.Phase == health.PhaseEjected {
						ks.cooldownUntil = st.CooldownUntil.UnixNano()
					}
				}
			}
		}
		if changed {
			r.schedule(now)
		}
	}
}

// recordEvent keeps a journal event for the report, up to maxEventsPerKey.
func (ks *keyState) recordEvent(ev *health.Event, at int64) {
	if len(ks.events) < maxEventsPerKey {
		ks.events = append(ks.events, EventReport{At: formatTS(at), From: ev.From.String(), To: ev.To.String(),
			Reason: ev.Reason, Actor: ev.Actor, Message: ev.Message})
	} else {
		ks.eventsOmitted++
	}
}

func (ks *keyState) setPhase(p health.Phase, at int64) {
	at = max(at, ks.since)
	ks.phaseNs[ks.phase] += at - ks.since
	ks.since = at
	out := p.OutOfRotation()
	switch {
	case out && !ks.isOut:
		ks.isOut, ks.outStart = true, at
	case !out && ks.isOut:
		ks.isOut = false
		ks.out = append(ks.out, interval{ks.outStart, at})
	}
	if ks.phase == health.PhaseProbing && p != health.PhaseProbing && ks.probePending {
		ks.probePending = false
		ks.probes.Unanswered++
	}
	ks.phase = p
}

// ---- failover model ----

func (r *replayer) horizon() int64 {
	return int64(max(requestLinger, r.opts.EvidenceWindow))
}

func (r *replayer) addEvidence(ks *keyState, e evidence) {
	keep := r.horizon() + int64(r.opts.EvidenceWindow)
	for ks.evHead < len(ks.ev) && ks.ev[ks.evHead].ts < e.ts-keep {
		ks.evHead++
	}
	if ks.evHead > 1024 && ks.evHead*2 > len(ks.ev) {
		n := copy(ks.ev, ks.ev[ks.evHead:])
		ks.ev, ks.evHead = ks.ev[:n], 0
	}
	ks.ev = append(ks.ev, e)
}

// nearest returns the outcome of the logged attempt on ks nearest to t (within the evidence
// window, client errors and the request's own lines excluded; the earlier one on a tie).
func (r *replayer) nearest(ks *keyState, t int64, own []attemptRec) (health.Outcome, bool) {
	ev := ks.ev[ks.evHead:]
	w := int64(r.opts.EvidenceWindow)
	lo, hi := 0, len(ev)
	for lo < hi { // first entry with ts >= t
		mid := (lo + hi) / 2
		if ev[mid].ts < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	usable := func(e *evidence) bool {
		if e.outcome == health.OutcomeClientError {
			return false
		}
		for _, a := range own {
			if a.line == e.line {
				return false
			}
		}
		return true
	}
	before, after := lo-1, lo
	for before >= 0 && !usable(&ev[before]) && t-ev[before].ts <= w {
		before--
	}
	for after < len(ev) && !usable(&ev[after]) && ev[after].ts-t <= w {
		after++
	}
	okB := before >= 0 && t-ev[before].ts <= w && usable(&ev[before])
	okA := after < len(ev) && ev[after].ts-t <= w && usable(&ev[after])
	switch {
	case okB && (!okA || t-ev[before].ts <= ev[after].ts-t):
		return ev[before].outcome, true
	case okA:
		return ev[after].outcome, true
	}
	return 0, false
}

// resolveUpTo scores the requests whose linger is over at t.
func (r *replayer) resolveUpTo(t int64) {
	h := r.horizon()
	for r.qHead < len(r.queue) && r.queue[r.qHead].t0+h <= t {
		r.resolve(r.queue[r.qHead])
		r.spare = append(r.spare, r.queue[r.qHead])
		r.queue[r.qHead] = nil
		r.qHead++
	}
	if r.qHead > 1024 && r.qHead*2 > len(r.queue) {
		n := copy(r.queue, r.queue[r.qHead:])
		clear(r.queue[n:])
		r.queue, r.qHead = r.queue[:n], 0
	}
}

func (r *replayer) resolve(req *request) {
	if req.id != "" && r.pending[req.id] == req {
		delete(r.pending, req.id)
	}
	first := req.attempts[0]
	ks := r.keys[first.key]
	mr := &r.models[req.model]
	var out *RequestOutcome
	if r.opts.Observer != nil {
		out = &RequestOutcome{ID: req.id, Line: first.line, At: tm(req.t0), Model: r.setup.Models[req.model].Model,
			FirstChannel: ks.key.Channel, FirstModel: ks.key.Model}
		defer func() { r.opts.Observer.Request(*out) }()
	}
	if first.outcome == health.OutcomeClientError && !first.overflow {
		ks.req.ClientErrors++
		mr.ClientErrors++
		if out != nil {
			out.ClientError = true
		}
		return
	}
	failNone := first.outcome != health.OutcomeSuccess
	failLogged := true
	for _, a := range req.attempts {
		if a.outcome == health.OutcomeSuccess {
			failLogged = false
		}
	}
	ok, tries, assumed := r.withPolicy(req)
	rerouted := req.firstKey != first.key
	listed := req.plan.Cohort() == failover.CohortListed
	if out != nil {
		out.FailedWithoutFailover, out.FailedAsLogged, out.FailedWithPolicy = failNone, failLogged, !ok
		out.PolicyAttempts, out.Rerouted, out.Assumed, out.Listed = tries, rerouted, assumed, listed
		if req.lastKey >= 0 {
			out.PolicyChannel = r.keys[req.lastKey].key.Channel
		}
	}
	for _, rep := range []*RequestReport{&ks.req, mr} {
		rep.Requests++
		rep.FailedWithoutFailover += b2i(failNone)
		rep.FailedAsLogged += b2i(failLogged)
		rep.FailedWithPolicy += b2i(!ok)
		rep.Rerouted += b2i(rerouted)
		rep.FailedOver += b2i(ok && tries > 1)
		rep.Assumed += b2i(assumed)
		rep.Listed += b2i(listed)
		rep.FailedListed += b2i(listed && !ok)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// withPolicy decides a request's fate under the replayed policy. A request whose plan followed
// the log to its end is decided already. Otherwise its plan (the proxy's planner, see
// internal/failover) goes on from where it departed, on the engine's state at the end of the
// linger, and an attempt's outcome is, in this order: the request's own logged attempt on that
// channel not taken yet; the channel's logged attempt nearest in time within the evidence window;
// with no evidence at all, success on a channel the engine routes normally and failure on a panic
// route (assumed reports that).
func (r *replayer) withPolicy(req *request) (ok bool, tries int, assumed bool) {
	if !req.ended {
		req.plan.SetRand(r.rng) // the plans that follow the log keep their own draws
		for range 64 {
			if req.ended {
				break
			}
			switch st := req.step; st.Action {
			case failover.ActionWait:
				r.setStep(req, req.plan.Next(tm(req.stepAt)), req.stepAt)
			case failover.ActionTry:
				k := r.keyOfStep(&st)
				if k >= 0 {
					req.lastKey = k
				}
				res, src := r.outcomeFor(req, k)
				req.assumed = req.assumed || src == "assumed"
				if k >= 0 {
					r.trace(req, req.stepAt, k, res.Outcome, src)
				}
				req.plan.Observe(res)
				r.setStep(req, req.plan.Next(tm(req.stepAt)), req.stepAt)
			default:
				req.ended = true
			}
		}
		r.drain(r.clock)
	}
	return req.ok, req.plan.Attempts(), req.assumed
}

// outcomeFor is what the planned attempt on key k gets: see withPolicy.
func (r *replayer) outcomeFor(req *request, k int32) (failover.Result, string) {
	if k < 0 {
		return failover.Result{Outcome: health.OutcomeSuccess}, "assumed"
	}
	for i := range req.attempts {
		a := &req.attempts[i]
		if a.key == k && !a.used && (a.outcome != health.OutcomeClientError || a.overflow) {
			a.used = true
			res := failover.Result{Outcome: a.outcome, RetryAfter: a.retry}
			if a.overflow {
				res.ErrCode = failover.CodeContextLengthExceeded
			}
			return res, "log"
		}
	}
	if o, ok := r.nearest(r.keys[k], req.t0, req.attempts); ok {
		return failover.Result{Outcome: o}, "evidence"
	}
	if req.step.Panic {
		return failover.Result{Outcome: health.OutcomeServerError, Detail: "assumed"}, "assumed"
	}
	return failover.Result{Outcome: health.OutcomeSuccess}, "assumed"
}

// ---- input problems ----

// Problem kinds.
const (
	KindMalformed      = "malformed"
	KindUnknownChannel = "unknown_channel"
	KindOutOfOrder     = "out_of_order"
	KindIncident       = "incident"
)

func (r *replayer) problem(line int64, kind, msg string) {
	switch kind {
	case KindMalformed:
		r.sum.Malformed++
	case KindUnknownChannel:
		r.sum.UnknownChannel++
	case KindOutOfOrder:
		r.sum.OutOfOrder++
	}
	r.perKind[kind]++
	if r.perKind[kind] <= r.opts.MaxProblems {
		r.problems = append(r.problems, Problem{Line: line, Kind: kind, Message: msg})
	}
}

func (r *replayer) unknownKey(line int64, channel, model []byte) {
	r.sum.UnknownChannel++
	name := string(channel) + "\x00" + string(model)
	if r.unknown[name] {
		return
	}
	r.unknown[name] = true
	var msg string
	switch mi, ok := r.modelIdx[string(model)]; {
	case !ok:
		msg = fmt.Sprintf("model %q is not routed by the policy (channel %q); its lines are skipped", model, channel)
	default:
		msg = fmt.Sprintf("channel %q is not a candidate of policy %s for model %q; its lines are skipped",
			channel, r.setup.Models[mi].Policy, model)
	}
	r.perKind[KindUnknownChannel]++
	if r.perKind[KindUnknownChannel] <= r.opts.MaxProblems {
		r.problems = append(r.problems, Problem{Line: line, Kind: KindUnknownChannel, Message: msg})
	}
}

// ---- reorder buffer ----

// entryHeap is a binary min-heap by (ts, line): equal timestamps keep their order in the file.
type entryHeap []entry

func (h entryHeap) less(i, j int) bool {
	return h[i].ts < h[j].ts || (h[i].ts == h[j].ts && h[i].line < h[j].line)
}

func (h *entryHeap) push(e entry) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *entryHeap) pop() entry {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = entry{}
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s.less(l, m) {
			m = l
		}
		if l+1 < n && s.less(l+1, m) {
			m = l + 1
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
