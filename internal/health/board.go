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
//   - the probe lease: one holder, for one sync interval from its last renewal;
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
	at time.Time
	r  FleetReport
}

type boardLease struct {
	holder string
	until  time.Time
}

// NewFleetBoard returns an empty board for replicas that exchange every interval (the probe
// lease lasts that long; reports and inputs expire after 3 intervals).
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

// Exchange implements Board; it never fails.
func (b *FleetBoard) Exchange(now time.Time, replica string, reports []FleetReport, proposals []FleetVerdict) ([]FleetInput, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	for _, p := range proposals {
		b.propose(now, replica, p)
	}
	mine := make(map[Key]boardReport, len(reports))
	for _, r := range reports {
		mine[r.Key] = boardReport{at: now, r: r}
		if r.RetryAfterUntil.After(now) && r.RetryAfterUntil.After(b.retry[r.Key]) {
			b.retry[r.Key] = r.RetryAfterUntil
		}
		if r.WantsProbeLease {
			if l, ok := b.leases[r.Key]; !ok || l.holder == replica {
				b.leases[r.Key] = boardLease{holder: replica, until: now.Add(b.interval)}
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
	return b.inputs(now, replica), nil
}

// expire drops what has run out by now (mu held). A lease or report is valid up to and
// including its end, so that a holder renewing exactly one interval later keeps it.
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
