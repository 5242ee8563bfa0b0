package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/fleet/redistest"
)

func realStore(t *testing.T, url, pass, replica string) *Store {
	t.Helper()
	ep, err := ParseURL(url, pass)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(ep, Settings{Name: "real", Replica: replica, EvidenceTTL: time.Minute, Live: 5 * time.Second,
		Lease: 3 * time.Second, Phases: []string{"Healthy", "Ejected"}})
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRealRedis plays the store's rules on Debian's redis-server: its Lua (cjson, TIME under
// effects replication) is not miniredis's.
func TestRealRedis(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "t0ps3cret")
	now := time.Now()
	a := realStore(t, srv.URL(), "t0ps3cret", "a")
	b := realStore(t, srv.URL(), "t0ps3cret", "b")

	mustSync(t, a, now, Report{
		Evidence:   []Evidence{{Key: "ns/ch|gpt-4o", Deltas: map[Bucket]int64{{10, "req"}: 7, {10, "fail"}: 7}, Phase: "Ejected"}},
		Proposals:  []Proposal{{Key: "ns/ch|gpt-4o", Next: "a-verdict", TTL: time.Minute}},
		Probes:     []string{"ns/ch|gpt-4o"},
		RetryAfter: []RetryAfter{{Key: "ns/ch|gpt-4o", For: 10 * time.Second}},
		Clients:    []ClientUse{{Client: "team/app", Requests: 2, Tokens: 20}},
	})
	v := mustSync(t, b, now, Report{
		Evidence:    []Evidence{{Key: "ns/ch|gpt-4o", Deltas: map[Bucket]int64{{10, "req"}: 1}, Phase: "Healthy"}},
		Proposals:   []Proposal{{Key: "ns/ch|gpt-4o", Next: "b-verdict", TTL: time.Minute}},
		Probes:      []string{"ns/ch|gpt-4o"},
		Clients:     []ClientUse{{Client: "team/app", Requests: 1, Tokens: 5}},
		ReadClients: []string{"team/app"},
	})
	k := v.Evidence["ns/ch|gpt-4o"]
	if k.Others[Bucket{10, "req"}] != 7 || k.Others[Bucket{10, "fail"}] != 7 || k.Phases["Ejected"] != 1 || k.Phases["Healthy"] != 1 {
		t.Errorf("b sees evidence %+v", k)
	}
	if v.Verdicts["ns/ch|gpt-4o"].Value != "a-verdict" || v.Leases["ns/ch|gpt-4o"] != "a" || v.RetryAfter["ns/ch|gpt-4o"] <= 9*time.Second {
		t.Errorf("b sees verdicts %v, leases %v, retry %v", v.Verdicts, v.Leases, v.RetryAfter)
	}
	if got := v.Clients["team/app"]; got.MinuteRequests != 3 || got.DayTokens != 25 || v.Replicas != 2 {
		t.Errorf("b sees clients %+v and %d replicas", v.Clients, v.Replicas)
	}
	// An empty view decodes (real cjson writes {} for an empty table, miniredis []).
	c := realStore(t, srv.URL(), "t0ps3cret", "c")
	if _, err := c.Sync(context.Background(), now, Report{}); err != nil {
		t.Fatal(err)
	}
	// Without the password: refused, and the error does not carry it.
	if _, err := realStore(t, srv.URL(), "", "d").Sync(context.Background(), now, Report{}); err == nil {
		t.Error("a sync without the password worked")
	}
}

// TestRealRedisPausedThenResumed: SIGSTOP of the server (every call hangs) turns the replica to
// local mode after LocalAfter; SIGCONT brings it back by itself.
func TestRealRedisPausedThenResumed(t *testing.T) {
	srv := redistest.Start(t)
	peer := &recorder{}
	s := NewSyncer(realStore(t, srv.URL(), "", "a"), peer, SyncerOptions{Name: "real", LocalAfter: time.Second})
	ctx := context.Background()
	if err := s.Join(ctx, 0); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	start := time.Now()
	for i := 0; s.Connected() && i < 20; i++ {
		s.Step(ctx)
	}
	if s.Connected() {
		t.Fatalf("still connected %v after the server stopped", time.Since(start))
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("local mode after %v, want about LocalAfter (1s) plus one CallTimeout", d)
	}
	srv.Resume()
	for i := 0; !s.Connected() && i < 20; i++ {
		s.Step(ctx)
		time.Sleep(50 * time.Millisecond)
	}
	if !s.Connected() || peer.alone != 1 {
		t.Fatalf("after SIGCONT: link %+v, alone %d", s.Link(), peer.alone)
	}
}
