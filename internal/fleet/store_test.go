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
	return newStore(rdb, Settings{Name: "test", Replica: replica, Live: 5 * time.Second, Phases: []string{"Healthy", "Ejected"}})
}

func mustSync(t *testing.T, s *Store, now time.Time, r Report) View {
	t.Helper()
	v, err := s.Sync(context.Background(), now, r)
	if err != nil {
		t.Fatalf("sync of %s: %v", s.set.Replica, err)
	}
	return v
}

// TestReplicasPerPhase: each replica's phase of a key is counted once, its latest; a replica
// that stops syncing leaves the counts and the replicas after the liveness window.
func TestReplicasPerPhase(t *testing.T) {
	m := newMini(t)
	a, b := miniStore(t, m, "a"), miniStore(t, m, "b")
	mustSync(t, a, t0, Report{Phases: []Phase{{Key: "k", Phase: "Healthy"}}})
	mustSync(t, a, t0, Report{Phases: []Phase{{Key: "k", Phase: "Ejected"}}})
	v := mustSync(t, b, t0, Report{Phases: []Phase{{Key: "k", Phase: "Healthy"}}})
	if got := v.Phases["k"]; got["Ejected"] != 1 || got["Healthy"] != 1 || v.Replicas != 2 {
		t.Fatalf("phases %v and %d replicas, want a Ejected, b Healthy", got, v.Replicas)
	}
	m.SetTime(t0.Add(6 * time.Second))
	v = mustSync(t, b, t0.Add(6*time.Second), Report{Phases: []Phase{{Key: "k", Phase: "Healthy"}}})
	if got := v.Phases["k"]; got["Ejected"] != 0 || got["Healthy"] != 1 || v.Replicas != 1 {
		t.Fatalf("after a left: phases %v and %d replicas, want b alone", got, v.Replicas)
	}
	m.SetTime(t0.Add(12 * time.Second))
	if v := mustSync(t, b, t0.Add(12*time.Second), Report{}); len(v.Phases) != 0 {
		t.Fatalf("no replica reports k any more, yet: %v", v.Phases)
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
	mustSync(t, a, t0, Report{Phases: []Phase{{Key: "k", Phase: "Ejected"}}, Clients: []ClientUse{{Client: "c", Requests: 1}}})
	v := mustSync(t, other, t0, Report{ReadClients: []string{"c"}})
	if len(v.Phases) != 0 || v.Replicas != 1 || v.Clients["c"] != (ClientTotals{}) {
		t.Fatalf("fleet other sees fleet test's state: %+v", v)
	}
}
