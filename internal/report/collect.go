// Package report is the monthly review of the design notes ("once a month, review the window and
// the thresholds from the journal of incidents, not from the team's memory: how many false
// ejections, how many outages the scheme missed, how fast traffic came back after the provider
// recovered, what switching cost in latency and money"), computed from the proxy's access log.
//
// The access log carries attempts, not phases: the health decisions come from replaying it
// through the policy (internal/replay, the proxy's own engine and planner); the error rates,
// windows and latencies come from the log itself. Everything here is a pure function of the
// replay's stream (replay.Observer) and its report; docs/report.md defines every figure.
package report

import (
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/replay"
)

// Options tune the review. The zero value means the documented defaults.
type Options struct {
	// SameRateMargin (percentage points): an ejection is false when the other channels of the
	// model saw an error rate at least the ejected channel's minus this, in the same window.
	SameRateMargin float64
	// OutageRatePercent and OutageMinRequests define an outage window; 0 takes each policy's
	// errorRatePercent and minRequests.
	OutageRatePercent int
	OutageMinRequests int
	// Prices: USD per 1,000 tokens by model; money is reported only for priced models.
	Prices map[string]float64
}

// DefaultSameRateMargin is Options.SameRateMargin's default.
const DefaultSameRateMargin = 5

// mark is one logged attempt in a channel's recent window.
type mark struct {
	at     int64
	failed bool
}

// keyStats is what the collector keeps per channel×model.
type keyStats struct {
	key   health.Key
	model int // index in the setup's models
	cand  int // index in the model's candidates

	attempts, failures, rateLimited, clientErrors, probes int64

	recent []mark // attempts of the last window (the policy's), oldest first
	head   int

	// tumbling windows of the outage rule, aligned at the first line
	bucket           int64 // index of the window being counted; -1 before the first attempt
	bucketN, bucketF int64
	hot              []hotWindow

	phase      health.Phase
	lastFail   int64 // last logged failure
	goodSince  int64 // first logged success after lastFail; 0 when none yet
	judgements []judgement
	recoveries []recovery
}

type hotWindow struct {
	from, to int64
	n, f     int64
}

// judgement is the false-ejection verdict of one ejection, taken when it happened.
type judgement struct {
	at                   int64
	reason, message      string
	ownN, ownF           int64
	otherN, otherF       int64
	judged, falseEjected bool
	latencyRule          bool
}

// recovery is one ejection's way back to Healthy.
type recovery struct {
	ejectedAt, firstGood, healthyAt int64
}

// open is a request being collected from its logged attempts (by requestId).
type open struct {
	t0            int64
	firstKey      int
	lastKey       int
	failedLatency time.Duration
	failed        int
	succeeded     bool
}

// movedRequest is a request the log shows answered on another channel than its first attempt's.
type movedRequest struct {
	id       string
	from, to int // key indexes: first attempt, answer
}

// Collector is the replay.Observer the review is built from.
type Collector struct {
	setup *replay.Setup
	opts  Options
	keys  []*keyStats
	index map[health.Key]int
	// modelKeys: per setup model, its keys in candidate order.
	modelKeys [][]int
	start     int64
	started   bool

	open  map[string]*open
	costs []costSample
	moved []movedRequest
	// Episodes holds every ejection, from the transitions.
	Episodes replay.Episodes
}

// costSample is one request the log shows failed over: what its failed attempts cost it.
type costSample struct {
	key     int // its first attempt's key
	latency time.Duration
}

// NewCollector prepares a collector for a replay of setup.
func NewCollector(setup *replay.Setup, opts Options) *Collector {
	if opts.SameRateMargin == 0 {
		opts.SameRateMargin = DefaultSameRateMargin
	}
	c := &Collector{setup: setup, opts: opts, index: map[health.Key]int{}, open: map[string]*open{},
		modelKeys: make([][]int, len(setup.Models))}
	for mi, m := range setup.Models {
		for ci, cand := range m.Candidates {
			k := health.Key{Channel: cand.Channel, Model: m.Model}
			c.index[k] = len(c.keys)
			c.modelKeys[mi] = append(c.modelKeys[mi], len(c.keys))
			c.keys = append(c.keys, &keyStats{key: k, model: mi, cand: ci, bucket: -1, phase: health.PhaseHealthy})
		}
	}
	return c
}

func (c *Collector) settings(ks *keyStats) *health.Settings {
	return &c.setup.Models[ks.model].Settings
}

func (c *Collector) outageRule(ks *keyStats) (rate, minReq int) {
	s := c.settings(ks)
	rate, minReq = s.ErrorRatePercent, s.MinRequests
	if c.opts.OutageRatePercent > 0 {
		rate = c.opts.OutageRatePercent
	}
	if c.opts.OutageMinRequests > 0 {
		minReq = c.opts.OutageMinRequests
	}
	return rate, minReq
}

// Attempt implements replay.Observer.
func (c *Collector) Attempt(a replay.LoggedAttempt) {
	ki, ok := c.index[health.Key{Channel: a.Channel, Model: a.Model}]
	if !ok {
		return
	}
	ks := c.keys[ki]
	at := a.At.UnixNano()
	if !c.started {
		c.started, c.start = true, at
	}
	failed := a.Outcome.IsFailure()
	if failed {
		ks.lastFail, ks.goodSince = at, 0
	} else if a.Outcome == health.OutcomeSuccess && ks.goodSince == 0 {
		ks.goodSince = at
	}
	if a.Probe {
		ks.probes++
		return
	}
	if a.Outcome == health.OutcomeClientError {
		ks.clientErrors++
		return
	}
	ks.attempts++
	if failed {
		ks.failures++
	}
	if a.Outcome == health.OutcomeRateLimited {
		ks.rateLimited++
	}
	c.addRecent(ks, mark{at: at, failed: failed})
	c.count(ks, at, failed)
	c.request(ki, a, at)
}

func (c *Collector) addRecent(ks *keyStats, m mark) {
	w := int64(c.settings(ks).Window)
	for ks.head < len(ks.recent) && ks.recent[ks.head].at < m.at-w {
		ks.head++
	}
	if ks.head > 1024 && ks.head*2 > len(ks.recent) {
		n := copy(ks.recent, ks.recent[ks.head:])
		ks.recent, ks.head = ks.recent[:n], 0
	}
	ks.recent = append(ks.recent, m)
}

// window counts the key's logged attempts read so far in [at-w, at]: the engine's window at an
// ejection stamped at `at` (the line that caused it has been read; one stamped at a window
// boundary comes before the line at that instant).
func (ks *keyStats) window(at, w int64) (n, f int64) {
	for _, m := range ks.recent[ks.head:] {
		if m.at >= at-w && m.at <= at {
			n++
			if m.failed {
				f++
			}
		}
	}
	return n, f
}

// count adds an attempt to the outage rule's tumbling window, closing the previous ones.
func (c *Collector) count(ks *keyStats, at int64, failed bool) {
	w := int64(c.settings(ks).Window)
	b := (at - c.start) / w
	if b != ks.bucket {
		c.closeBucket(ks)
		ks.bucket, ks.bucketN, ks.bucketF = b, 0, 0
	}
	ks.bucketN++
	if failed {
		ks.bucketF++
	}
}

func (c *Collector) closeBucket(ks *keyStats) {
	if ks.bucket < 0 {
		return
	}
	rate, minReq := c.outageRule(ks)
	if rate > 0 && ks.bucketN >= int64(minReq) && ks.bucketF*100 >= ks.bucketN*int64(rate) {
		w := int64(c.settings(ks).Window)
		from := c.start + ks.bucket*w
		ks.hot = append(ks.hot, hotWindow{from: from, to: from + w, n: ks.bucketN, f: ks.bucketF})
	}
}

// request follows the logged attempts of one client request, for the switching cost.
func (c *Collector) request(ki int, a replay.LoggedAttempt, at int64) {
	if a.RequestID == "" {
		return
	}
	o := c.open[a.RequestID]
	if o != nil && at > o.t0+int64(time.Minute) { // a reused id: the old request is complete
		c.closeRequest(a.RequestID, o)
		o = nil
	}
	if o == nil {
		o = &open{t0: at, firstKey: ki}
		c.open[a.RequestID] = o
	}
	o.lastKey = ki
	switch {
	case a.Outcome == health.OutcomeSuccess:
		o.succeeded = true
	case !o.succeeded:
		o.failed++
		o.failedLatency += a.Latency
	}
}

func (c *Collector) closeRequest(id string, o *open) {
	delete(c.open, id)
	if !o.succeeded {
		return
	}
	if o.failed > 0 {
		c.costs = append(c.costs, costSample{key: o.firstKey, latency: o.failedLatency})
	}
	if o.lastKey != o.firstKey {
		c.moved = append(c.moved, movedRequest{id: id, from: o.firstKey, to: o.lastKey})
	}
}

// Transition implements replay.Observer.
func (c *Collector) Transition(t replay.Transition) {
	c.Episodes.Add(t)
	ki, ok := c.index[health.Key{Channel: t.Channel, Model: t.Model}]
	if !ok {
		return
	}
	ks := c.keys[ki]
	ks.phase = t.To
	at := t.At.UnixNano()
	if t.IsEjection() {
		c.judge(ks, at, t.Reason, t.Message)
		ks.recoveries = append(ks.recoveries, recovery{ejectedAt: at})
		return
	}
	if t.To == health.PhaseHealthy && len(ks.recoveries) > 0 {
		r := &ks.recoveries[len(ks.recoveries)-1]
		if r.healthyAt == 0 {
			r.healthyAt = at
			if ks.goodSince >= r.ejectedAt && ks.goodSince <= at {
				r.firstGood = ks.goodSince
			}
		}
	}
}

// judge decides whether an ejection at `at` was false: see docs/report.md.
func (c *Collector) judge(ks *keyStats, at int64, reason, message string) {
	s := c.settings(ks)
	w := int64(s.Window)
	j := judgement{at: at, reason: reason, message: message}
	j.ownN, j.ownF = ks.window(at, w)
	for _, ki := range c.modelKeys[ks.model] {
		if other := c.keys[ki]; other != ks {
			n, f := other.window(at, w)
			j.otherN += n
			j.otherF += f
		}
	}
	switch reason {
	case health.ReasonLatencyP95Exceeded, health.ReasonRampLatencyRise:
		j.latencyRule = true
	default:
		if j.otherN >= int64(s.MinRequests) && j.otherN > 0 {
			j.judged = true
			j.falseEjected = rate(j.otherF, j.otherN) >= rate(j.ownF, j.ownN)-c.opts.SameRateMargin
		}
	}
	ks.judgements = append(ks.judgements, j)
}

func rate(f, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(f) * 100 / float64(n)
}

// Request implements replay.Observer: the replay scored a request, so its lines are all read.
func (c *Collector) Request(r replay.RequestOutcome) {
	if r.ID == "" {
		return
	}
	if o := c.open[r.ID]; o != nil && o.t0 == r.At.UnixNano() {
		c.closeRequest(r.ID, o)
	}
}

// flush closes what the end of the log leaves open.
func (c *Collector) flush() {
	for _, ks := range c.keys {
		c.closeBucket(ks)
		ks.bucket = -1
	}
	ids := make([]string, 0, len(c.open))
	for id := range c.open {
		ids = append(ids, id)
	}
	sortStrings(ids)
	for _, id := range ids {
		c.closeRequest(id, c.open[id])
	}
}
