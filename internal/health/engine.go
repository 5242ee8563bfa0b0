package health

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Key names one channel×model: health is tracked per pair, so one failing model leaves the
// channel's other models alone.
type Key struct{ Channel, Model string }

// Target is one channel×model as configured.
type Target struct {
	Key
	Settings Settings
	// Disabled takes the key out of rotation at once (operator override). DisabledUntil, when
	// set, ends the override by itself; without Disabled it means nothing.
	Disabled       bool
	DisabledUntil  time.Time
	DisabledReason string
	// DryRun: the key's policy is rolled out with mode DryRun. Its outcomes go to a shadow state
	// machine with the same settings, whose transitions are journaled with the reason prefixed
	// DryRun and reported in Status.DryRun*; the key itself takes no verdict from them, so Select
	// and probes go on as if it were healthy (routing follows the listed order anyway).
	DryRun bool
}

// DryRunPrefix starts the Reason of every event a shadow (Target.DryRun) journals: the decision
// the policy would have taken, e.g. DryRunErrorRateExceeded.
const DryRunPrefix = "DryRun"

// Observation is the result of one attempt on a channel×model.
type Observation struct {
	At         time.Time // when the attempt ended; the engine's only clock
	Outcome    Outcome
	Latency    time.Duration // whole attempt; 0 when unknown (then it feeds no latency figure)
	RetryAfter time.Duration // from a 429, 0 when absent
	Probe      bool          // the result of a probe handed out by ProbesDue
}

// Event is one journal entry: a phase transition (or a ramp step) with its cause.
type Event struct {
	Seq            uint64 // increases by one per event, never reused
	At             time.Time
	Channel, Model string
	From, To       Phase
	Reason         string // CamelCase rule or action, e.g. ErrorRateExceeded, CooldownElapsed
	Message        string // observed figures and window, e.g. "error rate 21.7% (52/240) >= 18% over 2m0s"
	Actor          string // "rule", "probe", "operator" or "fleet"
}

// Status is the live view of one channel×model.
type Status struct {
	Key
	Phase            Phase
	Score            int // 0-100, as of the last bucket boundary
	TrafficPercent   int // share of its normal traffic the key may take now: see Route.Weight; 0 when not routable
	WindowRequests   int
	WindowFailures   int
	ErrorRatePercent float64
	P95              time.Duration // of successful attempts over the window
	Baseline         time.Duration // slow-moving healthy p95 the latency penalty compares against
	Ejections        int           // since the engine started
	CooldownUntil    time.Time     // while Ejected
	RetryAfterUntil  time.Time     // while a Retry-After is pending
	LastTransition   time.Time
	Reason, Message  string // of the last transition
	Panic            bool   // the last Select for this model returned this key by panic routing
	// FleetVerdictBy is the replica whose fleet verdict (SetFleet) the key follows while the store
	// holds it; empty when the key judges on its own evidence.
	FleetVerdictBy string
	// DryRun: the key's policy is in DryRun; the fields after it are its shadow's (would-be)
	// phase, score and last transition, and the key's own figures above stay those of a key
	// that takes no verdict.
	DryRun                                     bool
	DryRunPhase                                Phase
	DryRunScore                                int
	DryRunReason, DryRunMessage                string
	DryRunLastTransition                       time.Time
	DryRunWindowRequests, DryRunWindowFailures int
}

const (
	actorRule     = "rule"
	actorProbe    = "probe"
	actorOperator = "operator"
	actorFleet    = "fleet" // a verdict another replica set, adopted from the fleet store
)

// Engine holds the state of every configured channel×model. It is safe for concurrent use: one
// mutex, held for one key's bookkeeping (Tick, Status, ProbesDue and Updates take it key by key;
// Select for the candidates of one model; Configure for the reload).
//
// The periodic sweeps (Tick, ProbesDue, Updates) visit only the keys that time can change (see
// state.atRest) and the keys touched since the last Updates, not every key: with thousands of
// channel×models, nearly all of them idle, a sweep over all of them every tick took milliseconds
// of CPU in one burst, and the requests that arrived meanwhile waited for it (docs/benchmarks.md,
// "Tail latency at scale").
type Engine struct {
	mu      sync.Mutex
	states  map[Key]*state
	byModel map[string]map[string]*state // model → channel → state: Select hashes each name once
	order   []*state                     // sorted by channel, model: sweeps walk it deterministically
	scratch []selItem

	active []*state // keys not at rest (state.listed): the only ones a sweep must advance
	dirty  []*state // keys touched since the last Updates (state.dirty)
	// swept is the latest time Tick advanced the keys to and sweeps counts the Ticks: a key at
	// rest is not visited, and catches up with swept when next used (advance).
	swept  int64
	sweeps uint64
	// sweepMu serialises the sweeps over active and dirty, which share sweepBuf.
	sweepMu  sync.Mutex
	sweepBuf []*state
	// sweepAll makes the sweeps visit every key (and Updates report every key), as they did
	// before they skipped the keys at rest: the reference the tests and benchmarks compare with.
	sweepAll bool

	journal []Event // ring of the last cap(journal) events
	next    int     // ring position of the next event once the ring is full
	seq     uint64
}

// NewEngine returns an engine with no keys; journalSize bounds the journal (1024 when <= 0).
func NewEngine(journalSize int) *Engine {
	if journalSize <= 0 {
		journalSize = 1024
	}
	return &Engine{states: map[Key]*state{}, journal: make([]Event, 0, journalSize)}
}

// nanos is the engine's internal clock unit. Times before 1970 (and the zero Time) map to 0, so
// an unset timestamp can never move a key backwards.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(0, t.UnixNano())
}

func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// Configure loads a new set of targets: keys that remain keep their state (a window whose
// Window, RecentErrorWindow or LatencyP95 changed restarts empty), new keys start Healthy,
// removed keys are dropped. Disabled changes are journaled with actor "operator". Settings that
// fail Validate are replaced by DefaultSettings("chat"); the policy compiler is expected to have
// rejected them already.
func (e *Engine) Configure(now time.Time, targets []Target) {
	t := nanos(now)
	e.mu.Lock()
	defer e.mu.Unlock()
	next := make(map[Key]*state, len(targets))
	for _, tg := range targets {
		set := tg.Settings
		if set.Validate() != nil {
			set = DefaultSettings("chat")
		}
		set.RampSteps = slices.Clone(set.RampSteps)
		s := next[tg.Key]
		if s == nil {
			s = e.states[tg.Key]
		}
		if s == nil {
			s = newState(tg.Key, set, t)
			s.sweeps = e.sweeps // joins the Ticks from now on, not the ones before it existed
		} else {
			e.advance(s, t)
			s.reconfigure(set)
		}
		next[tg.Key] = s
		e.applyDisabled(s, tg)
		switch {
		case tg.DryRun && s.shadow == nil:
			s.shadow = newState(tg.Key, set, s.now)
			s.shadow.dryRun, s.shadow.sweeps = true, s.sweeps
		case tg.DryRun:
			e.advance(s.shadow, t)
			s.shadow.reconfigure(set)
		default:
			s.shadow = nil // back to Enforce: the key's own machine decides from here on
		}
	}
	for k, s := range e.states {
		if next[k] != s {
			s.gone = true // a sweep that still holds it skips it
		}
	}
	order := make([]*state, 0, len(next)) // a new slice: sweeps may still walk the old one
	for _, s := range next {
		order = append(order, s)
	}
	slices.SortFunc(order, func(a, b *state) int {
		return cmp.Or(cmp.Compare(a.key.Channel, b.key.Channel), cmp.Compare(a.key.Model, b.key.Model))
	})
	// Every key is touched: the next Updates reports them all (new keys, changed overrides).
	clear(e.active)
	clear(e.dirty)
	e.active, e.dirty = e.active[:0], e.dirty[:0]
	for i, s := range order {
		s.pos, s.listed, s.dirty = i, false, false
		e.touch(s)
	}
	byModel := map[string]map[string]*state{}
	for k, s := range next {
		if byModel[k.Model] == nil {
			byModel[k.Model] = map[string]*state{}
		}
		byModel[k.Model][k.Channel] = s
	}
	e.states, e.byModel, e.order = next, byModel, order
}

// each calls fn for every key in channel, model order, taking the lock per key, so that a sweep
// over thousands of keys never holds up Observe and Select for more than one key's work. Keys
// dropped by a concurrent Configure are skipped.
func (e *Engine) each(fn func(s *state)) {
	e.mu.Lock()
	order := e.order
	e.mu.Unlock()
	for _, s := range order {
		e.mu.Lock()
		if !s.gone {
			fn(s)
		}
		e.mu.Unlock()
	}
}

// touch records that s was used (called with mu held): the next Updates reports it, and the
// sweeps visit it for as long as it is not at rest.
func (e *Engine) touch(s *state) {
	if !s.dirty {
		s.dirty = true
		e.dirty = append(e.dirty, s)
	}
	e.list(s)
}

// list puts s on the active list unless it is at rest or there already (mu held).
func (e *Engine) list(s *state) {
	if !s.listed && !s.atRest() {
		s.listed = true
		e.active = append(e.active, s)
	}
}

// eachActive is each over the keys that are not at rest, in channel, model order: for every
// other key, advancing it would change nothing (state.atRest). A key that fn brings to rest
// leaves the list, and is reported by the next Updates as touched.
func (e *Engine) eachActive(fn func(s *state)) {
	if e.sweepAll {
		e.each(fn)
		return
	}
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	e.mu.Lock()
	list := append(e.sweepBuf[:0], e.active...)
	for _, s := range list {
		s.listed = false // a concurrent touch may list it again; list below does not twice
	}
	clear(e.active)
	e.active = e.active[:0]
	slices.SortFunc(list, byPos)
	e.mu.Unlock()
	for _, s := range list {
		e.mu.Lock()
		if !s.gone {
			fn(s)
			if s.atRest() {
				e.touch(s) // its last change, if any, is still to be reported
			} else {
				e.list(s)
			}
		}
		e.mu.Unlock()
	}
	clear(list) // the buffer must not keep removed keys alive
	e.sweepBuf = list[:0]
}

func byPos(a, b *state) int { return cmp.Compare(a.pos, b.pos) }

// Observe records the result of one attempt. It is the proxy's hot path: no allocation unless the
// observation causes a transition. Unknown keys and client errors change nothing.
func (e *Engine) Observe(k Key, o Observation) {
	if o.Outcome == OutcomeClientError || o.Outcome >= numOutcomes {
		return // the caller's problem: not even the request count moves
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.states[k]; s != nil {
		if s.shadow != nil {
			// DryRun: only the shadow takes the outcome; the key's clock still moves.
			e.advance(s, nanos(o.At))
			e.observe(s.shadow, o)
		} else {
			e.observe(s, o)
		}
		e.touch(s)
	}
}

// Tick applies every time-driven transition due by now. Observe, Select, Status and ProbesDue
// apply them lazily for the keys they touch, and each transition is stamped with the moment it
// became due, so how often Tick runs changes when the journal is written, never what it says.
// It visits only the keys not at rest; the others take the time when next used.
func (e *Engine) Tick(now time.Time) {
	t := nanos(now)
	e.mu.Lock()
	e.swept = max(e.swept, t)
	e.sweeps++
	e.mu.Unlock()
	e.eachActive(func(s *state) { e.advance(s, t) })
}

// ProbesDue appends to dst the keys in Probing whose next probe is due at now and marks each as
// handed out: a key is returned at most once per ProbeInterval, and not again while its probe is
// in flight, unless that probe is older than ProbeMaxLatency (its answer could only fail now).
// Keys are appended in channel, model order. A key out of service by the fleet's verdict, with
// fresh fleet input, is handed out only while this replica holds its probe lease (SetFleet): one
// probe per key for the whole fleet.
func (e *Engine) ProbesDue(now time.Time, dst []Key) []Key {
	t := nanos(now)
	e.eachActive(func(s *state) { // a key in Probing is never at rest
		switch s.base {
		case PhaseEjected, PhaseProbing, PhaseDisabled: // only these can be Probing by now
			e.advance(s, t)
		default:
			return
		}
		if s.base != PhaseProbing || s.now < s.probeNext ||
			(s.probeInFlight && s.now < s.probeSent+int64(s.set.ProbeMaxLatency)) || !s.mayProbe() {
			return
		}
		s.probeInFlight, s.probeSent, s.probeNext = true, s.now, s.now+int64(s.set.ProbeInterval)
		dst = append(dst, s.key)
	})
	return dst
}

// Status returns every key's live state at now, sorted by channel, model.
func (e *Engine) Status(now time.Time) []Status {
	t := nanos(now)
	var out []Status
	e.each(func(s *state) {
		e.advance(s, t)
		out = append(out, s.status())
	})
	return out
}

// Updates appends to dst, in channel, model order, the live state at now of every key whose
// Status may have changed since the previous call: the keys touched since (observed, selected,
// reconfigured: after Configure, every key) and those time can change. Any other key's Status is
// the one the previous call reported, or Configure's. It is meant for one consumer, the publisher
// of the health gauges: a second caller would take the first one's updates.
func (e *Engine) Updates(now time.Time, dst []Status) []Status {
	t := nanos(now)
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	e.mu.Lock()
	for _, s := range e.active {
		if !s.dirty {
			s.dirty = true
			e.dirty = append(e.dirty, s)
		}
	}
	list := append(e.sweepBuf[:0], e.dirty...)
	for _, s := range list {
		s.dirty = false // touched again from here on: reported again next time
	}
	clear(e.dirty)
	e.dirty = e.dirty[:0]
	slices.SortFunc(list, byPos)
	if e.sweepAll {
		list = append(list[:0], e.order...)
	}
	e.mu.Unlock()
	for _, s := range list {
		e.mu.Lock()
		if !s.gone {
			e.advance(s, t)
			dst = append(dst, s.status())
		}
		e.mu.Unlock()
	}
	clear(list)
	e.sweepBuf = list[:0]
	return dst
}

// StatusOf returns one key's live state at now.
func (e *Engine) StatusOf(now time.Time, k Key) (Status, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.states[k]
	if s == nil {
		return Status{}, false
	}
	e.advance(s, nanos(now))
	return s.status(), true
}

// Events returns the retained events with Seq > sinceSeq, oldest first. The journal keeps the
// last journalSize events; a caller that fell further behind sees a gap in Seq.
func (e *Engine) Events(sinceSeq uint64) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.journal)
	if n == 0 || e.seq <= sinceSeq {
		return nil
	}
	skip := n - int(min(e.seq-sinceSeq, uint64(n))) // events older than the ones asked for
	out := make([]Event, 0, n-skip)
	start := 0
	if n == cap(e.journal) {
		start = e.next
	}
	for i := skip; i < n; i++ {
		out = append(out, e.journal[(start+i)%n])
	}
	return out
}

// emit appends one event to the journal ring.
func (e *Engine) emit(s *state, at int64, from, to Phase, reason, actor, msg string) {
	e.seq++
	ev := Event{Seq: e.seq, At: timeOf(at), Channel: s.key.Channel, Model: s.key.Model,
		From: from, To: to, Reason: reason, Message: msg, Actor: actor}
	if len(e.journal) < cap(e.journal) {
		e.journal = append(e.journal, ev)
		return
	}
	e.journal[e.next] = ev
	e.next = (e.next + 1) % len(e.journal)
}

// wouldDo names a shadow's transition for its journal message ("would eject ...").
func wouldDo(from, to Phase) string {
	switch to {
	case PhaseEjected:
		if from == PhaseProbing {
			return "keep ejected"
		}
		return "eject"
	case PhaseProbing:
		return "probe"
	case PhaseRampingUp:
		if from == PhaseRampingUp {
			return "ramp up"
		}
		return "start ramping up"
	case PhaseDegraded:
		return "degrade"
	case PhaseRateLimited:
		return "rate-limit"
	case PhaseHealthy:
		return "restore"
	}
	return "move to " + to.String()
}
