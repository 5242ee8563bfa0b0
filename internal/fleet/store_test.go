package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

var t0 = time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)

// newMini is a miniredis on t0 and a store per replica on it.
func newMini(t *testing.T) *miniredis.Miniredis {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(t0)
	return m
}

func miniStore(t *testing.T, m *miniredis.Miniredis, replica string) *Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { rdb.Close() })
	return newStore(rdb, Settings{Name: "test", Replica: replica, EvidenceTTL: time.Minute, Live: 5 * time.Second,
		Lease: 3 * time.Second, Phases: []string{"Healthy", "Ejected"}})
}

func mustSync(t *testing.T, s *Store, now time.Time, r Report) View {
	t.Helper()
	v, err := s.Sync(context.Background(), now, r)
	if err != nil {
		t.Fatalf("sync of %s: %v", s.set.Replica, err)
	}
	return v
}

func TestSyncSumsTheOtherReplicasReports(t *testing.T) {
	m := newMini(t)
	a, b, c := miniStore(t, m, "a"), miniStore(t, m, "b"), miniStore(t, m, "c")
	req := func(at int64, n int64) map[Bucket]int64 {
		return map[Bucket]int64{{At: at, Name: "req"}: n, {At: at, Name: "fail"}: n / 2}
	}
	mustSync(t, a, t0, Report{Evidence: []Evidence{{Key: "k", Deltas: req(100, 4), Phase: "Healthy"}}})
	mustSync(t, b, t0, Report{Evidence: []Evidence{{Key: "k", Deltas: req(100, 6), Phase: "Ejected"}}})
	// a again: its second delta adds to its first.
	mustSync(t, a, t0, Report{Evidence: []Evidence{{Key: "k", Deltas: req(101, 2), Phase: "Healthy"}}})
	v := mustSync(t, c, t0, Report{})
	got := v.Evidence["k"]
	want := map[Bucket]int64{{100, "req"}: 10, {100, "fail"}: 5, {101, "req"}: 2, {101, "fail"}: 1}
	if len(got.Others) != len(want) {
		t.Fatalf("c sees %v, want %v", got.Others, want)
	}
	for b, n := range want {
		if got.Others[b] != n {
			t.Errorf("c sees %v = %d, want %d", b, got.Others[b], n)
		}
	}
	if got.Phases["Healthy"] != 1 || got.Phases["Ejected"] != 1 {
		t.Errorf("phases = %v, want one Healthy and one Ejected", got.Phases)
	}
	// a does not see its own counts.
	va := mustSync(t, a, t0, Report{})
	if n := va.Evidence["k"].Others[Bucket{100, "req"}]; n != 6 {
		t.Errorf("a sees %d requests of others in bucket 100, want b's 6", n)
	}
	if _, ok := va.Evidence["k"].Others[Bucket{101, "req"}]; ok {
		t.Errorf("a sees its own bucket 101: %v", va.Evidence["k"].Others)
	}
	if va.Replicas != 3 {
		t.Errorf("replicas = %d, want 3", va.Replicas)
	}
}

func TestStaleReportsFadeOut(t *testing.T) {
	m := newMini(t)
	a, b := miniStore(t, m, "a"), miniStore(t, m, "b")
	mustSync(t, a, t0, Report{Evidence: []Evidence{{Key: "k", Deltas: map[Bucket]int64{{100, "req"}: 5}, Phase: "Ejected"}}})
	if v := mustSync(t, b, t0, Report{}); v.Evidence["k"].Others[Bucket{100, "req"}] != 5 || v.Replicas != 2 {
		t.Fatalf("b sees %+v (replicas %d), want a's 5 requests", v.Evidence["k"], v.Replicas)
	}
	// a's window moves on: a report with a horizon past bucket 100 drops it for everyone.
	mustSync(t, a, t0, Report{Evidence: []Evidence{{Key: "k", Deltas: map[Bucket]int64{{161, "req"}: 1}, Horizon: 101, Phase: "Ejected"}}})
	v := mustSync(t, b, t0, Report{})
	if _, ok := v.Evidence["k"].Others[Bucket{100, "req"}]; ok || v.Evidence["k"].Others[Bucket{161, "req"}] != 1 {
		t.Fatalf("after the horizon b sees %v, want bucket 161 only", v.Evidence["k"].Others)
	}
	// a stops reporting (it died): past the liveness window it is no longer a replica nor a
	// phase, and past the evidence TTL its counts are gone.
	m.SetTime(t0.Add(6 * time.Second))
	v = mustSync(t, b, t0.Add(6*time.Second), Report{})
	if v.Replicas != 1 || v.Evidence["k"].Phases["Ejected"] != 0 {
		t.Errorf("6s later: replicas %d, phases %v; want only b, no phase of a", v.Replicas, v.Evidence["k"].Phases)
	}
	if v.Evidence["k"].Others[Bucket{161, "req"}] != 1 {
		t.Errorf("6s later the evidence of a's window is gone already: %v", v.Evidence["k"].Others)
	}
	m.FastForward(61 * time.Second)
	v = mustSync(t, b, t0.Add(67*time.Second), Report{})
	if _, ok := v.Evidence["k"]; ok {
		t.Errorf("past the evidence TTL b still sees %+v", v.Evidence["k"])
	}
}

func TestFirstVerdictWinsThenCompareAndSet(t *testing.T) {
	m := newMini(t)
	a, b := miniStore(t, m, "a"), miniStore(t, m, "b")
	// Both trip in the same interval: the first to reach the store sets the verdict.
	mustSync(t, a, t0, Report{Proposals: []Proposal{{Key: "k", Next: "ejected-by-a", TTL: time.Minute}}})
	v := mustSync(t, b, t0, Report{Proposals: []Proposal{{Key: "k", Next: "ejected-by-b", TTL: time.Minute}}})
	if got := v.Verdicts["k"].Value; got != "ejected-by-a" {
		t.Fatalf("held verdict %q, want a's: the first trip wins", got)
	}
	if ttl := v.Verdicts["k"].TTL; ttl <= 50*time.Second || ttl > time.Minute {
		t.Errorf("TTL %v, want about a minute", ttl)
	}
	// A change on a stale Prev is refused; on the held one it is taken.
	v = mustSync(t, b, t0, Report{Proposals: []Proposal{{Key: "k", Prev: "ejected-by-b", Next: "probing-b", TTL: time.Minute}}})
	if got := v.Verdicts["k"].Value; got != "ejected-by-a" {
		t.Fatalf("a compare-and-set on a value never held replaced the verdict: %q", got)
	}
	v = mustSync(t, b, t0, Report{Proposals: []Proposal{{Key: "k", Prev: "ejected-by-a", Next: "probing-b", TTL: time.Minute}}})
	if got := v.Verdicts["k"].Value; got != "probing-b" {
		t.Fatalf("compare-and-set on the held verdict: %q, want probing-b", got)
	}
	// An empty Next on the held value lifts the verdict; a verdict also ends with its TTL.
	v = mustSync(t, a, t0, Report{Proposals: []Proposal{{Key: "k", Prev: "probing-b", Next: ""}}})
	if _, ok := v.Verdicts["k"]; ok {
		t.Fatalf("lifted verdict still held: %+v", v.Verdicts)
	}
	mustSync(t, a, t0, Report{Proposals: []Proposal{{Key: "k2", Next: "x", TTL: time.Second}}})
	m.FastForward(1100 * time.Millisecond)
	if v := mustSync(t, b, t0, Report{}); len(v.Verdicts) != 0 {
		t.Errorf("expired verdict still held: %+v", v.Verdicts)
	}
}

func TestOneProbeLeaseForTheFleet(t *testing.T) {
	m := newMini(t)
	a, b := miniStore(t, m, "a"), miniStore(t, m, "b")
	if v := mustSync(t, a, t0, Report{Probes: []string{"k"}}); v.Leases["k"] != "a" {
		t.Fatalf("a's lease: owner %q", v.Leases["k"])
	}
	if v := mustSync(t, b, t0, Report{Probes: []string{"k"}}); v.Leases["k"] != "a" {
		t.Fatalf("b got the lease a holds: owner %q", v.Leases["k"])
	}
	// a renews it on every sync: it outlives its 3 s as long as a asks.
	for i := range 4 {
		m.FastForward(2 * time.Second)
		if v := mustSync(t, a, t0, Report{Probes: []string{"k"}}); v.Leases["k"] != "a" {
			t.Fatalf("renewal %d: owner %q", i, v.Leases["k"])
		}
	}
	// a stops asking (it died): the lease ends and b gets it.
	m.FastForward(3100 * time.Millisecond)
	if v := mustSync(t, b, t0, Report{Probes: []string{"k"}}); v.Leases["k"] != "b" {
		t.Fatalf("after a's lease ended: owner %q, want b", v.Leases["k"])
	}
	// b releases it: a gets it at once; a release by a non-owner does nothing.
	mustSync(t, a, t0, Report{Release: []string{"k"}})
	if v := mustSync(t, a, t0, Report{Probes: []string{"k"}}); v.Leases["k"] != "b" {
		t.Fatalf("a released b's lease: owner %q", v.Leases["k"])
	}
	mustSync(t, b, t0, Report{Release: []string{"k"}})
	if v := mustSync(t, a, t0, Report{Probes: []string{"k"}}); v.Leases["k"] != "a" {
		t.Fatalf("after b's release: owner %q, want a", v.Leases["k"])
	}
}

func TestLatestRetryAfterAppliesToTheFleet(t *testing.T) {
	m := newMini(t)
	a, b := miniStore(t, m, "a"), miniStore(t, m, "b")
	mustSync(t, a, t0, Report{RetryAfter: []RetryAfter{{Key: "k", For: 30 * time.Second}}})
	v := mustSync(t, b, t0, Report{})
	if d := v.RetryAfter["k"]; d <= 29*time.Second || d > 30*time.Second {
		t.Fatalf("b sees Retry-After %v, want a's 30s", d)
	}
	// The provider's latest word wins, shorter or not.
	mustSync(t, b, t0, Report{RetryAfter: []RetryAfter{{Key: "k", For: 5 * time.Second}}})
	if d := mustSync(t, a, t0, Report{}).RetryAfter["k"]; d > 5*time.Second {
		t.Fatalf("a sees %v, want b's later 5s", d)
	}
	m.FastForward(5100 * time.Millisecond)
	if v := mustSync(t, a, t0, Report{}); len(v.RetryAfter) != 0 {
		t.Fatalf("ended Retry-After still shared: %v", v.RetryAfter)
	}
}

func TestClientLimitsAddUpAcrossReplicas(t *testing.T) {
	m := newMini(t)
	a, b := miniStore(t, m, "a"), miniStore(t, m, "b")
	read := []string{"team/app"}
	mustSync(t, a, t0, Report{Clients: []ClientUse{{Client: "team/app", Requests: 3, Tokens: 300}}, ReadClients: read})
	v := mustSync(t, b, t0.Add(10*time.Second), Report{Clients: []ClientUse{{Client: "team/app", Requests: 2, Tokens: 50}}, ReadClients: read})
	want := ClientTotals{MinuteRequests: 5, MinuteTokens: 350, DayRequests: 5, DayTokens: 350}
	if got := v.Clients["team/app"]; got != want {
		t.Fatalf("fleet totals %+v, want %+v", got, want)
	}
	// A minute after a's requests they leave the minute, not the day.
	v = mustSync(t, b, t0.Add(61*time.Second), Report{ReadClients: read})
	want = ClientTotals{MinuteRequests: 2, MinuteTokens: 50, DayRequests: 5, DayTokens: 350}
	if got := v.Clients["team/app"]; got != want {
		t.Fatalf("a minute later %+v, want %+v", got, want)
	}
	// The next UTC day starts at 0.
	next := time.Date(2026, 12, 3, 0, 0, 1, 0, time.UTC)
	if got := mustSync(t, a, next, Report{ReadClients: read}).Clients["team/app"]; got != (ClientTotals{}) {
		t.Fatalf("the next day starts with %+v", got)
	}
}

func TestFleetNamesDoNotMix(t *testing.T) {
	m := newMini(t)
	a := miniStore(t, m, "a")
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { rdb.Close() })
	other := newStore(rdb, Settings{Name: "other", Replica: "x"})
	mustSync(t, a, t0, Report{Proposals: []Proposal{{Key: "k", Next: "v", TTL: time.Minute}}})
	if v := mustSync(t, other, t0, Report{}); len(v.Verdicts) != 0 || v.Replicas != 1 {
		t.Fatalf("fleet other sees fleet test's state: %+v", v)
	}
}

// TestPhasesWithoutCounts: a replica that reports only its phase of a key (the proxy does, for
// the fleet view) is counted.
func TestPhasesWithoutCounts(t *testing.T) {
	m := newMini(t)
	a, b := miniStore(t, m, "a"), miniStore(t, m, "b")
	mustSync(t, a, t0, Report{Evidence: []Evidence{{Key: "k", Phase: "Ejected"}}})
	v := mustSync(t, b, t0, Report{Evidence: []Evidence{{Key: "k", Phase: "Healthy"}}})
	if got := v.Evidence["k"].Phases; got["Ejected"] != 1 || got["Healthy"] != 1 {
		t.Fatalf("phases %v, want one Ejected and one Healthy", got)
	}
}
