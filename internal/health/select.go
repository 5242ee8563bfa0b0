package health

import "time"

// Candidate is one channel a policy offers for a model, in policy order.
type Candidate struct {
	Channel string
	Weight  int // base weight (1-1000)
}

// Route is a channel the proxy may try, in the order Select returns it.
type Route struct {
	Channel string
	Weight  float64 // effective weight: base × degraded factor × ramp share × rate-limit share
	Score   int
	Phase   Phase
	Panic   bool // no candidate was routable; this is the least-bad one
}

// selItem is one candidate during Select; kept small because Select sorts them.
type selItem struct {
	s      *state
	weight float64 // effective weight
	frac   float64 // effective weight / candidate weight: the share of its normal traffic; -1 when not routable
	idx    int     // position in cands
	demote bool    // lost its share draw: goes after the others
}

// Select returns the routable channels of model among cands, in the order the proxy should try
// them, appended to dst[:0] (no allocation once dst and the engine's scratch have grown).
//
// A channel is routable when Healthy, Degraded, RateLimited or RampingUp and no Retry-After is
// pending. Its Route.Weight is the candidate weight × score/100 (Degraded only) × ramp step/100
// (RampingUp only) × rate-limit share/100. Let f = Weight / candidate weight, the share of its
// normal traffic the channel may take. rnd must be uniform in [0, 1); it is the only randomness.
//
//   - Weighted: the first route is drawn with probability Weight/ΣWeight (rnd × ΣWeight falls in
//     its slice of the cumulative weights, in policy order); the rest follow by Weight, highest
//     first, ties in policy order.
//   - HealthScore: routes are ordered by score band (91-100, 81-90, ...: one failure must not move
//     all traffic), best first, ties in policy order; in 10% of calls (canaryShare) the best channel
//     of a lower band goes first, so a demoted channel keeps producing evidence; then the share
//     draw below.
//   - Priority: policy order; then the share draw below.
//
// Share draw (HealthScore, Priority): walking that order, a channel with f < 1 keeps its place
// with probability f and is otherwise moved behind all the others, keeping relative order. One rnd
// decides every draw: after a draw with probability f it is rescaled to rnd/f (kept) or
// (rnd-f)/(1-f) (moved), which is again uniform. So a channel at the 5% ramp step that would
// otherwise be first is first in 5% of calls, and behind the others in the rest.
//
// Panic: when no candidate is routable and panicRouting is set, the result is the single least-bad
// non-Disabled candidate (lowest Phase.Severity, then highest Score, then policy order) with its
// candidate weight and Panic set; without panicRouting, or if all are Disabled, it is empty.
// Candidates the engine was not configured with are skipped.
func (e *Engine) Select(now time.Time, model string, cands []Candidate, strategy Strategy, panicRouting bool, rnd float64, dst []Route) []Route {
	dst = dst[:0]
	t := nanos(now)
	rnd = min(max(rnd, 0), 1-0x1p-53) // the largest float64 below 1
	e.mu.Lock()
	defer e.mu.Unlock()

	items := e.scratch[:0]
	channels := e.byModel[model]
	for i, c := range cands {
		s := channels[c.Channel]
		if s == nil {
			continue
		}
		e.advance(s, t)
		f, ok := s.traffic(s.now)
		if !ok {
			f = -1
		}
		items = append(items, selItem{s: s, weight: float64(max(c.Weight, 0)) * max(f, 0), frac: f, idx: i})
	}
	e.scratch = items
	route := func(it *selItem) Route {
		return Route{Channel: cands[it.idx].Channel, Weight: it.weight, Score: it.s.score, Phase: it.s.phase()}
	}

	// Routable items first, in policy order (the rest only matter to panic routing, which orders
	// them itself).
	n := 0
	for i := range items {
		if items[i].frac >= 0 {
			if i != n {
				items[n], items[i] = items[i], items[n]
			}
			n++
		}
	}
	var chosen *state
	switch {
	case n > 0:
		sel := items[:n]
		order(sel, strategy, rnd)
		for i := range sel {
			if !sel[i].demote {
				dst = append(dst, route(&sel[i]))
			}
		}
		for i := range sel {
			if sel[i].demote {
				dst = append(dst, route(&sel[i]))
			}
		}
	case panicRouting:
		best := -1
		for i := range items {
			if items[i].s.base != PhaseDisabled && (best < 0 || lessBad(&items[i], &items[best])) {
				best = i
			}
		}
		if best >= 0 {
			it := &items[best]
			chosen = it.s
			r := route(it)
			r.Weight, r.Panic = float64(max(cands[it.idx].Weight, 0)), true
			dst = append(dst, r)
		}
	}
	for i := range items {
		items[i].s.panic = items[i].s == chosen
		e.touch(items[i].s)
	}
	clear(items) // drop the state pointers: the scratch must not keep removed keys alive
	return dst
}

func lessBad(a, b *selItem) bool {
	if sa, sb := a.s.phase().Severity(), b.s.phase().Severity(); sa != sb {
		return sa < sb
	}
	if a.s.score != b.s.score {
		return a.s.score > b.s.score
	}
	return a.idx < b.idx
}

// order arranges the routable items per strategy and marks those that lose their share draw.
func order(sel []selItem, strategy Strategy, rnd float64) {
	switch strategy {
	case StrategyWeighted:
		total := 0.0
		for _, it := range sel {
			total += it.weight
		}
		if total <= 0 {
			return // nothing to draw by: policy order
		}
		pick, cum := -1, 0.0
		for i, it := range sel {
			if it.weight <= 0 {
				continue
			}
			pick, cum = i, cum+it.weight
			if rnd*total < cum {
				break
			}
		}
		first := sel[pick]
		copy(sel[1:pick+1], sel[:pick])
		sel[0] = first
		insertionSort(sel[1:], func(a, b *selItem) bool { return a.weight > b.weight })
		return
	case StrategyHealthScore:
		insertionSort(sel, func(a, b *selItem) bool { return scoreBand(a.s.score) > scoreBand(b.s.score) })
		// Canary: the best channel of a lower band goes first in canaryShare of the calls. Without
		// evidence a demoted channel's window empties, its score recovers, traffic returns and
		// fails again: it would flip Healthy/Degraded instead of being ejected (or cleared).
		if len(sel) > 1 && scoreBand(sel[1].s.score) < scoreBand(sel[0].s.score) {
			if rnd < canaryShare {
				sel[0], sel[1] = sel[1], sel[0]
				rnd /= canaryShare
			} else {
				rnd = (rnd - canaryShare) / (1 - canaryShare)
			}
		}
	}
	u := rnd
	for i := range sel {
		f := sel[i].frac
		switch {
		case f >= 1:
		case u < f:
			u /= f
		default:
			sel[i].demote = true
			u = (u - f) / (1 - f)
		}
	}
}

// scoreBand groups scores in bands of ten (91-100, 81-90, ...). HealthScore orders by band, not by
// raw score: one failure costs a point or two, and moving every first attempt to the peer for that
// would flip traffic between channels on noise.
func scoreBand(score int) int { return (score + 9) / 10 }

// canaryShare of HealthScore calls try the best lower-band channel first, so it keeps producing
// evidence: a real failure gets it ejected quickly, a blip clears.
const canaryShare = 0.1

// insertionSort is a stable sort without allocation; candidate lists are short.
func insertionSort(s []selItem, less func(a, b *selItem) bool) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && less(&s[j], &s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
