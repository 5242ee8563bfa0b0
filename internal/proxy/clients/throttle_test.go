package clients

import (
	"net/netip"
	"testing"
	"time"
)

func TestAuthSource(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"192.0.2.7:4711", "192.0.2.7/32"},
		{"[::ffff:192.0.2.7]:4711", "192.0.2.7/32"},
		{"[2001:db8:1:2:aaaa::1]:4711", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:80", "2001:db8:1:2::/64"},
	} {
		got, ok := AuthSource(tc.addr)
		if !ok || got.String() != tc.want {
			t.Errorf("authSource(%q) = %v %v, want %s", tc.addr, got, ok, tc.want)
		}
	}
	if _, ok := AuthSource("pipe"); ok {
		t.Error("a non-IP address is a source")
	}
}

// The table of sources stays bounded whatever number of sources fail; sources whose buckets are
// full again make room first.
func TestAuthThrottleTableIsBounded(t *testing.T) {
	th := NewThrottle(ThrottleSettings{Rate: 2, Burst: 20, Sources: 64})
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	guesser := netip.MustParsePrefix("198.51.100.1/32")
	for range 20 {
		th.Failed(guesser, now)
	}
	if th.Wait(guesser, now) == 0 {
		t.Fatal("the guesser is not throttled")
	}
	for i := range 10_000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		th.Failed(netip.PrefixFrom(a, 32), now)
		if len(th.buckets) > 64 {
			t.Fatalf("%d sources tracked, bound 64", len(th.buckets))
		}
	}
	later := now.Add(11 * time.Second) // every bucket full again
	th.Failed(netip.MustParsePrefix("203.0.113.9/32"), later)
	if len(th.buckets) != 1 {
		t.Errorf("%d sources after the refilled ones were swept, want 1", len(th.buckets))
	}
}
