// Package clients is what the gateway knows of its GatewayClients between requests: the index of
// their key hashes (keys.go), each client's limiter (its sliding minute, its day, its requests in
// flight, the fleet's use of its limits), the fair shares of the proxy's limits while they are
// contended, the throttle of failed keys per source, and the include_usage rewrite that lets a
// stream's tokens be counted (usage.go). It holds no key and does no I/O; the proxy's client
// layer (clientauth.go) asks it and answers the client.
package clients

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// Client limits, counted on this replica. Each replica enforces its share of a client's limit
// (the limit divided by Table.ProxyReplicas, rounded up): no replica asks another, so nothing on
// the request path waits for a shared store. What the approximation allows is in docs/clients.md.
// With a fleet store (--fleet-redis) connected, the per-minute and per-day limits are the whole
// limit instead, against this replica's use plus the others' as of the last sync (the proxy's fleet.go): the
// request path still reads only memory, and the fleet may overshoot by one sync interval's use.
//
// Requests count when admitted; tokens count when the provider's usage figures arrive (the end of
// a non-streamed answer, the usage event of a stream). A request is admitted while the client is
// under its token limits, so a replica may overshoot by the tokens of the requests in flight.

// minuteBuckets is the sliding minute's resolution: one bucket per second.
const minuteBuckets = 60

// Limit names, for switchyard_client_limited_total and the 429's message.
const (
	LimitRequestsPerMinute = "requestsPerMinute"
	LimitTokensPerMinute   = "tokensPerMinute"
	LimitTokensPerDay      = "tokensPerDay"
	LimitMaxInFlight       = "maxInFlight"
	LimitFairShare         = "fairShare"
)

// Limiter is one client's use of this replica: a sliding minute of requests and tokens in
// one-second buckets, and the UTC day's totals. It is kept across reloads (by client ID), so a
// config change does not hand out a fresh minute.
type Limiter struct {
	// namespace and name label the client's metric series.
	Namespace, Name string

	// inFlight and bodyBytes are the client's requests being served and the request body bytes
	// it holds in memory (against maxInFlight and its fair share of the proxy's limits).
	InFlight  atomic.Int64
	BodyBytes atomic.Int64

	mu sync.Mutex
	// retired: the client left the table and its series were removed (clientsState.retire);
	// count adds nothing more.
	retired bool
	buckets [minuteBuckets]secondBucket
	day     string // UTC date of the day's totals
	dayReq  int64
	dayTok  int64
	last    time.Time

	// unsentReq and unsentTok are counted since the last fleet sync took them (the proxy's fleet.go).
	unsentReq, unsentTok int64
	// others is the other replicas' use as of the last fleet sync; others.on is false without a
	// connected fleet store, and the limits are then this replica's share.
	others FleetUse
}

// FleetUse is the other replicas' use of a client's limits.
type FleetUse struct {
	On                   bool
	MinuteReq, MinuteTok int64
	DayTok               int64
	Day                  string // the UTC date dayTok is of
}

type secondBucket struct {
	sec      int64 // Unix second the bucket holds; another second's bucket is stale
	requests int64
	tokens   int64
}

// Retire marks the limiter's client gone from the table and runs drop (which removes its metric
// series) under the limiter's lock: count adds nothing after it, so a request still in flight
// cannot bring a series back.
func (l *Limiter) Retire(drop func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retired = true
	drop()
}

// Share is a replica's part of a limit: ceil(limit / replicas); 0 (no limit) stays 0.
func Share(limit int64, replicas int) int64 {
	if limit <= 0 {
		return 0
	}
	r := int64(max(replicas, 1))
	return (limit + r - 1) / r
}

// Admit counts a request if the client is under every limit's share, or says which limit it is
// at and how long until it is under it again.
func (l *Limiter) Admit(now time.Time, lim routing.ClientLimits, replicas int) (limit string, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollDay(now)
	sec := now.Unix()
	var o FleetUse
	if l.others.On {
		// The fleet's totals: the whole limit against everyone's use.
		o, replicas = l.others, 1
		if o.Day != l.day {
			o.DayTok = 0
		}
	}
	if rpm := Share(lim.RequestsPerMinute, replicas); rpm > 0 {
		if n := l.window(sec, func(b *secondBucket) int64 { return b.requests }); n+o.MinuteReq >= rpm {
			return LimitRequestsPerMinute, l.until(now, rpm-o.MinuteReq, func(b *secondBucket) int64 { return b.requests })
		}
	}
	if tpm := Share(lim.TokensPerMinute, replicas); tpm > 0 {
		if n := l.window(sec, func(b *secondBucket) int64 { return b.tokens }); n+o.MinuteTok >= tpm {
			return LimitTokensPerMinute, l.until(now, tpm-o.MinuteTok, func(b *secondBucket) int64 { return b.tokens })
		}
	}
	if tpd := Share(lim.TokensPerDay, replicas); tpd > 0 && l.dayTok+o.DayTok >= tpd {
		y, m, d := now.UTC().Date()
		return LimitTokensPerDay, time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC).Sub(now)
	}
	l.bucket(sec).requests++
	l.dayReq++
	l.unsentReq++
	l.last = now
	return "", 0
}

// Count adds v to the client's series of vec (labels namespace, client and one more), unless the
// client was retired. Under mu, so Retire cannot remove a series between the check and the add.
func (l *Limiter) Count(vec *prometheus.CounterVec, label string, v float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.retired {
		vec.WithLabelValues(l.Namespace, l.Name, label).Add(v)
	}
}

// AddTokens counts tokens the provider reported for the client's request.
func (l *Limiter) AddTokens(now time.Time, n int64) {
	if n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollDay(now)
	l.bucket(now.Unix()).tokens += n
	l.dayTok += n
	l.unsentTok += n
}

// TakeUnsent hands this replica's use since the last call to a fleet sync, with its own minute
// and day totals at that moment: the store's totals, which include them, minus these are the
// others' use.
func (l *Limiter) TakeUnsent(now time.Time) (req, tok int64, own FleetUse) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollDay(now)
	req, tok, l.unsentReq, l.unsentTok = l.unsentReq, l.unsentTok, 0, 0
	sec := now.Unix()
	own = FleetUse{MinuteReq: l.window(sec, func(b *secondBucket) int64 { return b.requests }),
		MinuteTok: l.window(sec, func(b *secondBucket) int64 { return b.tokens }), DayTok: l.dayTok, Day: l.day}
	return req, tok, own
}

// SetOthers records the other replicas' use (on) or, without a connected fleet store, drops it
// so that the limits are this replica's share again.
func (l *Limiter) SetOthers(o FleetUse) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.others = o
}

// Usage is the day's totals and the last request (admin API).
func (l *Limiter) Usage(now time.Time) (day string, requests, tokens int64, last time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollDay(now)
	return l.day, l.dayReq, l.dayTok, l.last
}

func (l *Limiter) rollDay(now time.Time) {
	if d := now.UTC().Format(time.DateOnly); d != l.day {
		l.day, l.dayReq, l.dayTok = d, 0, 0
	}
}

// bucket is the bucket of second sec, emptied if it held an older second.
func (l *Limiter) bucket(sec int64) *secondBucket {
	b := &l.buckets[uint64(sec)%minuteBuckets]
	if b.sec != sec {
		*b = secondBucket{sec: sec}
	}
	return b
}

// window sums a figure over the last minute (the current second and the 59 before it).
func (l *Limiter) window(sec int64, f func(*secondBucket) int64) int64 {
	var n int64
	for i := range l.buckets {
		if b := &l.buckets[i]; b.sec > sec-minuteBuckets && b.sec <= sec {
			n += f(b)
		}
	}
	return n
}

// until is how long until the minute's figure drops below limit, as the oldest seconds leave it;
// at least a second.
func (l *Limiter) until(now time.Time, limit int64, f func(*secondBucket) int64) time.Duration {
	sec := now.Unix()
	total := l.window(sec, f)
	for s := sec - minuteBuckets + 1; s <= sec; s++ {
		b := &l.buckets[uint64(s)%minuteBuckets]
		if b.sec != s {
			continue
		}
		total -= f(b)
		if total < limit {
			// Second s leaves the window at s+60.
			return max(time.Unix(s+minuteBuckets, 0).Sub(now), time.Second)
		}
	}
	return minuteBuckets * time.Second
}

// Concurrency. A client's requests in flight are bounded by its maxInFlight (its replica's share)
// and, while the proxy's own limits are contended, by its fair share of them: a client over
// max/active, where active is the number of clients with a request in flight, is refused so the
// others keep their slots. Uncontended, a single client may use all of them; the proxy's global
// limits (503) still apply to everyone.

// contended reports whether used of limit is above three quarters of it: from there on, a client
// over its fair share gives way.
func contended(used, limit int64) bool { return limit > 0 && used*4 > limit*3 }

// fairShare is one of active clients' part of limit (rounded up; at least 1).
func fairShare(limit, active int64) int64 {
	return max((limit+max(active, 1)-1)/max(active, 1), 1)
}

// ConcurrencyInputs are what decides whether a client's request may start: its requests in
// flight with this one, its maxInFlight share (0: none), the proxy's requests in flight (this
// one included), --max-in-flight, and the clients with a request in flight (it included).
type ConcurrencyInputs struct {
	Client, ClientMax, Global, GlobalMax, Active int64
}

// ConcurrencyVerdict is the limit a request starting now is over ("" when it may start).
func ConcurrencyVerdict(in ConcurrencyInputs) string {
	switch {
	case in.ClientMax > 0 && in.Client > in.ClientMax:
		return LimitMaxInFlight
	case contended(in.Global, in.GlobalMax) && in.Client > fairShare(in.GlobalMax, in.Active):
		return LimitFairShare
	}
	return ""
}

// BodyShareOK reports whether a client may hold client bytes of request bodies (this request's
// included) while the proxy holds global of its budget: always while the budget is not contended,
// and up to its fair share of it while it is.
func BodyShareOK(client, global, budget, active int64) bool {
	return !contended(global, budget) || client <= fairShare(budget, active)
}
