package clients

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Failed key guesses are throttled per source, so a guesser gets a few tries a second instead of
// thousands, and so a flood of 401s cannot push earlier lines out of the audit trail. A source is
// the TCP peer's IPv4 address, or its IPv6 /64 (one host usually holds a whole /64). Each source
// has a token bucket: every failure (no key, an unknown key) takes a token, tokens come back at
// the configured rate up to the burst, and a source with no token left is refused with 429 before
// its key is looked at: a throttled guesser learns nothing about the keys it tries, whatever they
// are. Behind a front proxy that does not keep the client's address every caller is one source.

// Defaults of the throttle (Options.AuthFailuresPerSecond, authThrottleSettings).
const (
	DefaultAuthFailuresPerSecond = 2.0
	AuthFailureBurst             = 20
	ThrottleSources              = 4096
)

// ThrottleSettings configure a Throttle. Rate <= 0 turns it off.
type ThrottleSettings struct {
	Rate    float64 // tokens a second a source gets back
	Burst   float64 // a source's tokens at most (and at first)
	Sources int     // sources tracked at most: the table never grows past it
}

// Throttle is the per-source failure buckets. Time is an argument (the server's clock).
type Throttle struct {
	set       ThrottleSettings
	mu        sync.Mutex
	buckets   map[netip.Prefix]*authBucket
	lastSweep time.Time
	// tracked is len(buckets), read without mu: while no source has failed, which is the usual
	// state, a request's check takes no lock.
	tracked atomic.Int64
}

type authBucket struct {
	tokens float64
	at     time.Time // when tokens was right
}

// NewThrottle is an empty throttle with the given settings.
func NewThrottle(set ThrottleSettings) *Throttle {
	return &Throttle{set: set, buckets: map[netip.Prefix]*authBucket{}}
}

// AuthSource is the source a remote address ("host:port", net/http's RemoteAddr) counts as; ok is
// false when it is not an IP address (a Unix socket, a test's fake address): not throttled.
func AuthSource(remoteAddr string) (netip.Prefix, bool) {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}, false
	}
	a := ap.Addr().Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, err := a.Prefix(bits)
	return p, err == nil
}

// refill brings b's tokens to now.
func (t *Throttle) refill(b *authBucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(t.set.Burst, b.tokens+d.Seconds()*t.set.Rate)
	}
	b.at = now
}

// Wait is how long the source must wait before it may try a key again; 0: it may now.
func (t *Throttle) Wait(src netip.Prefix, now time.Time) time.Duration {
	if t == nil || t.set.Rate <= 0 || t.tracked.Load() == 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[src]
	if b == nil {
		return 0
	}
	t.refill(b, now)
	if b.tokens >= t.set.Burst {
		// Full again: as a new source would be. Forgetting it keeps the table (and the lock-free
		// check) for sources that are failing now.
		delete(t.buckets, src)
		t.tracked.Store(int64(len(t.buckets)))
	}
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / t.set.Rate * float64(time.Second))
}

// Failed takes a token from the source for a failed key.
func (t *Throttle) Failed(src netip.Prefix, now time.Time) {
	if t == nil || t.set.Rate <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[src]
	if b == nil {
		if len(t.buckets) >= t.set.Sources {
			t.evict(now)
		}
		b = &authBucket{tokens: t.set.Burst, at: now}
		t.buckets[src] = b
	}
	t.refill(b, now)
	b.tokens = max(b.tokens-1, 0)
	t.tracked.Store(int64(len(t.buckets)))
}

// evict makes room for one more source: the sources whose buckets are full again are forgotten
// (they are as a new source would be), at most once a second since that is a walk of the table;
// when none is, an arbitrary one goes. A guesser with more sources than the table holds is beyond
// what a per-source throttle can stop, and the table stays bounded whatever it does.
func (t *Throttle) evict(now time.Time) {
	if now.Sub(t.lastSweep) >= time.Second {
		t.lastSweep = now
		for src, b := range t.buckets {
			t.refill(b, now)
			if b.tokens >= t.set.Burst {
				delete(t.buckets, src)
			}
		}
	}
	for src := range t.buckets {
		if len(t.buckets) < t.set.Sources {
			break
		}
		delete(t.buckets, src)
	}
}
