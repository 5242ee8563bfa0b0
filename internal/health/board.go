package health

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// FleetBoard is a fleet store in memory: the semantics a Redis store must have, for simulate and
// the tests, and the reference internal/fleet is tested against. It is safe for concurrent use
// and, like the engine, reads no clock: every call says what time it is.
//
// What it keeps, per key (a store would use one hash or key per item, with the same expiry):
//   - each replica's latest report, until the replica's next exchange replaces its reports, or
//     for 3 sync intervals after it was made (a replica that went away stops counting);
//   - the verdict, until its Until;
//   - the probe lease: one holder, for leaseIntervals sync intervals from its last renewal;
//   - the latest Retry-After end any replica reported, until it has passed;
//   - since when some report of the key carries evidence, and each replica's last two exchange
//     times, for FleetInput.Complete.
type FleetBoard struct {
	interval time.Duration

	mu       sync.Mutex
	reports  map[string]map[Key]boardReport // replica → key → its latest report
	verdicts map[Key]FleetVerdict
	versions map[Key]uint64 // last Version given per key: never reused, even after a verdict expired
	leases   map[Key]boardLease
	retry    map[Key]time.Time
	seen     map[string]time.Time // replica → its latest exchange
	prev     map[string]time.Time // replica → the exchange before it
	evidence map[Key]time.Time    // since when some replica's report has evidence (FleetInput.Complete)
}

type boardReport struct {
	at            time.Time
	r             FleetReport
	slow, samples uint32 // of r.Counts, for ordering the tops
}

type boardLease struct {
	holder string
	until  time.Time
}

// NewFleetBoard returns an empty board for replicas that exchange every interval (the probe
// lease lasts 2 intervals; reports and inputs expire after 3).
func NewFleetBoard(interval time.Duration) *FleetBoard {
	if interval <= 0 {
		interval = time.Second
	}
	return &FleetBoard{interval: interval, reports: map[string]map[Key]boardReport{}, verdicts: map[Key]FleetVerdict{},
		versions: map[Key]uint64{}, leases: map[Key]boardLease{}, retry: map[Key]time.Time{}, seen: map[string]time.Time{},
		prev: map[string]time.Time{}, evidence: map[Key]time.Time{}}
}

// staleAfter is how long a report counts, and how long an input holds, without a newer exchange.
const staleAfter = 3

// leaseIntervals is how long a probe lease holds without a renewal. The holder renews it at every
// exchange, one interval apart give or take the loop's jitter: a lease of exactly one interval
// passed to another replica whenever the holder's exchange came a few milliseconds late, and the
// new holder probed at once (8-9 probes where one proxy sent 5, TestFleetEjectsAndProbesLikeOneProxy).
// A holder that went away frees the key two intervals later.
const leaseIntervals = 2

// Exchange implements Board; it never fails.
func (b *FleetBoard) Exchange(now time.Time, replica string, reports []FleetReport, proposals []FleetVerdict) ([]FleetInput, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	for _, p := range proposals {
		b.propose(now, replica, p)
	}
	b.store(now, replica, reports)
	return b.inputs(now, replica), nil
}

// store replaces replica's reports with reports at now, grants or releases its leases and notes
// new evidence (mu held).
func (b *FleetBoard) store(now time.Time, replica string, reports []FleetReport) {
	mine := b.reports[replica]
	if mine == nil {
		mine = make(map[Key]boardReport, len(reports))
	}
	clear(mine)
	for _, r := range reports {
		mine[r.Key] = boardReport{at: now, r: r, slow: r.Counts.Slow(), samples: r.Counts.Samples()}
		if r.RetryAfterUntil.After(now) && r.RetryAfterUntil.After(b.retry[r.Key]) {
			b.retry[r.Key] = r.RetryAfterUntil
		}
		if r.WantsProbeLease {
			if l, ok := b.leases[r.Key]; !ok || l.holder == replica {
				b.leases[r.Key] = boardLease{holder: replica, until: now.Add(leaseIntervals * b.interval)}
			}
		}
	}
	for k, l := range b.leases {
		if l.holder == replica && !mine[k].r.WantsProbeLease {
			delete(b.leases, k) // done probing: the next asker gets it at once
		}
	}
	b.prev[replica], b.seen[replica] = b.seen[replica], now
	if len(mine) > 0 {
		b.reports[replica] = mine
	} else {
		delete(b.reports, replica)
	}
	for k, r := range mine {
		if _, ok := b.evidence[k]; !ok && hasEvidence(&r.r) {
			b.evidence[k] = now
		}
	}
}

// expire drops what has run out by now (mu held). A lease or report is valid up to and
// including its end.
func (b *FleetBoard) expire(now time.Time) {
	for k, v := range b.verdicts {
		if !now.Before(v.Until) {
			delete(b.verdicts, k)
		}
	}
	for k, l := range b.leases {
		if now.After(l.until) {
			delete(b.leases, k)
		}
	}
	for k, t := range b.retry {
		if !now.Before(t) {
			delete(b.retry, k)
		}
	}
	limit := now.Add(-staleAfter * b.interval)
	for rep, m := range b.reports {
		for k, r := range m {
			if r.at.Before(limit) {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(b.reports, rep)
		}
	}
	for rep, t := range b.seen {
		if t.Before(limit) {
			delete(b.seen, rep)
			delete(b.prev, rep)
		}
	}
	// Evidence ends when no report carries any.
	live := map[Key]bool{}
	for _, m := range b.reports {
		for k, r := range m {
			if hasEvidence(&r.r) {
				live[k] = true
			}
		}
	}
	for k := range b.evidence {
		if !live[k] {
			delete(b.evidence, k)
		}
	}
}

// hasEvidence: the report has something a fleet rule counts (see FleetInput.Complete).
func hasEvidence(r *FleetReport) bool {
	return r.Counts.Failures > 0 || r.Streak > 0 || r.Counts.Slow() > 0
}

// complete says every replica has exchanged twice since the key's evidence appeared (mu held).
func (b *FleetBoard) complete(k Key) bool {
	since, ok := b.evidence[k]
	if !ok {
		return false
	}
	for rep := range b.seen {
		if !b.prev[rep].After(since) {
			return false
		}
	}
	return true
}

// propose applies one proposal (mu held): NX when Prev is 0, else compare-and-set on Version.
func (b *FleetBoard) propose(now time.Time, replica string, p FleetVerdict) bool {
	held, ok := b.verdicts[p.Key]
	switch {
	case !p.Until.After(now):
		return false // would expire at once
	case p.Prev == 0 && ok, p.Prev != 0 && (!ok || held.Version != p.Prev):
		return false
	}
	b.versions[p.Key]++
	p.By, p.Version, p.Prev = replica, b.versions[p.Key], 0
	b.verdicts[p.Key] = p
	return true
}

// inputs builds replica's inputs (mu held), in channel, model order.
func (b *FleetBoard) inputs(now time.Time, replica string) []FleetInput {
	byKey := map[Key]*FleetInput{}
	get := func(k Key) *FleetInput {
		in := byKey[k]
		if in == nil {
			in = &FleetInput{Key: k, Expires: now.Add(staleAfter * b.interval)}
			byKey[k] = in
		}
		return in
	}
	for k := range b.reports[replica] {
		get(k)
	}
	for rep, m := range b.reports {
		if rep == replica {
			continue
		}
		for k, br := range m {
			in, r := get(k), &br.r
			in.Replicas++
			in.Others.Add(&r.Counts)
			in.Top.Consider(r)
			if r.Streak > 0 {
				in.Streak += r.Streak
				if in.StreakStart.IsZero() || r.StreakStart.Before(in.StreakStart) {
					in.StreakStart = r.StreakStart
				}
			}
			if r.LastSuccess.After(in.LastSuccess) {
				in.LastSuccess = r.LastSuccess
			}
		}
	}
	for k, v := range b.verdicts {
		v := v
		get(k).Verdict = &v
	}
	for k, l := range b.leases {
		in := get(k)
		in.ProbeLeaseHeld, in.HoldsProbeLease = true, l.holder == replica
	}
	for k, t := range b.retry {
		get(k).RetryAfterUntil = t
	}
	out := make([]FleetInput, 0, len(byKey))
	for k, in := range byKey {
		in.Complete = b.complete(k)
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b FleetInput) int {
		return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Model, b.Model))
	})
	return out
}

// Verdict returns the verdict held for k at now, if any: for the fleet view and the tests.
func (b *FleetBoard) Verdict(now time.Time, k Key) (FleetVerdict, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	v, ok := b.verdicts[k]
	return v, ok
}

// Replicas returns, sorted, the replicas that exchanged in the last 3 sync intervals, quiet or
// not (switchyard_fleet_replicas).
func (b *FleetBoard) Replicas(now time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	out := make([]string, 0, len(b.seen))
	for r := range b.seen {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

var _ Board = (*FleetBoard)(nil)

// RoundEntry is one replica's part of a Round: its reports and proposals, and the inputs it gets.
type RoundEntry struct {
	Replica   string
	Reports   []FleetReport
	Proposals []FleetVerdict
	Inputs    []FleetInput // set by Round
}

// Round is the exchange of many replicas at one instant, for simulations of large fleets: the
// proposals are applied in entries' order, then every replica's reports are stored and its
// leases granted in that order, then every entry gets its inputs, as Exchange would give them
// to a replica exchanging just after all the others. It costs O(replicas × keys) where calling
// Exchange for each replica costs O(replicas² × keys).
func (b *FleetBoard) Round(now time.Time, entries []RoundEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	for i := range entries {
		for _, p := range entries[i].Proposals {
			b.propose(now, entries[i].Replica, p)
		}
	}
	for i := range entries {
		b.store(now, entries[i].Replica, entries[i].Reports)
	}
	// One aggregate per key; each replica's input is it without the replica's own report.
	type agg struct {
		in     FleetInput   // every replica's sums
		streak [2]time.Time // two earliest StreakStarts
		lastOK [2]time.Time // two latest LastSuccesses
		// cands are the two best reports of each kind of FleetTop (failures, timeouts, slow
		// successes, streak), by replica.
		cands [8]topCand
	}
	aggs := map[Key]*agg{}
	get := func(k Key) *agg {
		a := aggs[k]
		if a == nil {
			a = &agg{in: FleetInput{Key: k, Expires: now.Add(staleAfter * b.interval)}}
			aggs[k] = a
		}
		return a
	}
	for rep, m := range b.reports {
		for k, br := range m {
			br := br // a fresh copy each iteration (Go 1.22): cands may point to it
			a, r := get(k), &br.r
			for kind := range 4 {
				c := topCand{replica: rep, r: &br}
				switch {
				case a.cands[2*kind].r == nil || betterTop(kind, &br, a.cands[2*kind].r):
					a.cands[2*kind+1], a.cands[2*kind] = a.cands[2*kind], c
				case a.cands[2*kind+1].r == nil || betterTop(kind, &br, a.cands[2*kind+1].r):
					a.cands[2*kind+1] = c
				}
			}
			a.in.Replicas++
			a.in.Others.Add(&r.Counts)
			a.in.Streak += r.Streak
			if r.Streak > 0 {
				a.streak = earliest2(a.streak, r.StreakStart)
			}
			a.lastOK = latest2(a.lastOK, r.LastSuccess)
		}
	}
	for k, v := range b.verdicts {
		v := v
		get(k).in.Verdict = &v
	}
	for k := range b.leases {
		get(k).in.ProbeLeaseHeld = true
	}
	for k, t := range b.retry {
		get(k).in.RetryAfterUntil = t
	}
	keys := make([]Key, 0, len(aggs))
	for k, a := range aggs {
		keys = append(keys, k)
		a.in.Complete = b.complete(k)
	}
	slices.SortFunc(keys, func(a, b Key) int { return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Model, b.Model)) })
	for i := range entries {
		e := &entries[i]
		mine := b.reports[e.Replica]
		e.Inputs = e.Inputs[:0]
		for _, k := range keys {
			a := aggs[k]
			in := a.in
			own, ok := mine[k]
			if !ok && in.Replicas == 0 && in.Verdict == nil && !in.ProbeLeaseHeld && in.RetryAfterUntil.IsZero() {
				continue
			}
			if ok {
				r := &own.r
				in.Replicas--
				c := r.Counts
				in.Others.Requests -= c.Requests
				in.Others.Failures -= c.Failures
				in.Others.Timeouts -= c.Timeouts
				for j, n := range c.Latency {
					in.Others.Latency[j] -= n
				}
				in.Streak -= r.Streak
				in.StreakStart = a.streak[0]
				if r.Streak > 0 && r.StreakStart.Equal(a.streak[0]) {
					in.StreakStart = a.streak[1]
				}
				in.LastSuccess = a.lastOK[0]
				if r.LastSuccess.Equal(a.lastOK[0]) {
					in.LastSuccess = a.lastOK[1]
				}
			} else {
				in.StreakStart, in.LastSuccess = a.streak[0], a.lastOK[0]
			}
			// Top without this replica: each kind's best other report is its best or, if that is
			// this replica's, its second best (as FleetTop.Consider over the others would find).
			for kind := range 4 {
				c := a.cands[2*kind]
				if c.replica == e.Replica {
					c = a.cands[2*kind+1]
				}
				if c.r == nil {
					continue
				}
				switch r := &c.r.r; kind {
				case 0:
					if r.Counts.Failures > 0 {
						in.Top.FailingRequests, in.Top.Failures = r.Counts.Requests, r.Counts.Failures
					}
				case 1:
					if r.Counts.Timeouts > 0 {
						in.Top.TimingRequests, in.Top.Timeouts = r.Counts.Requests, r.Counts.Timeouts
					}
				case 2:
					if c.r.slow > 0 {
						in.Top.Slow = r.Counts.Latency
					}
				case 3:
					in.Top.Streak = r.Streak
				}
			}
			if l, ok := b.leases[k]; ok {
				in.HoldsProbeLease = l.holder == e.Replica
			}
			e.Inputs = append(e.Inputs, in)
		}
	}
}

type topCand struct {
	replica string
	r       *boardReport
}

// betterTop says a goes before b in kind k of FleetTop (0 failures, 1 timeouts, 2 slow
// successes, 3 streak), as FleetTop.Consider orders them.
func betterTop(k int, a, b *boardReport) bool {
	ac, bc := &a.r.Counts, &b.r.Counts
	switch k {
	case 0:
		return ac.Failures > bc.Failures || (ac.Failures == bc.Failures && ac.Requests < bc.Requests)
	case 1:
		return ac.Timeouts > bc.Timeouts || (ac.Timeouts == bc.Timeouts && ac.Requests < bc.Requests)
	case 2:
		if a.slow != b.slow || a.slow == 0 {
			return a.slow > b.slow // without slow samples the order does not matter: no top
		}
		if a.samples != b.samples {
			return a.samples < b.samples
		}
		return slowerThan(&ac.Latency, &bc.Latency)
	}
	return a.r.Streak > b.r.Streak
}

func earliest2(t [2]time.Time, v time.Time) [2]time.Time {
	switch {
	case t[0].IsZero() || v.Before(t[0]):
		return [2]time.Time{v, t[0]}
	case t[1].IsZero() || v.Before(t[1]):
		return [2]time.Time{t[0], v}
	}
	return t
}

func latest2(t [2]time.Time, v time.Time) [2]time.Time {
	switch {
	case v.After(t[0]):
		return [2]time.Time{v, t[0]}
	case v.After(t[1]):
		return [2]time.Time{t[0], v}
	}
	return t
}
