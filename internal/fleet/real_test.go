package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/fleet/redistest"
	"github.com/switchyard-io/switchyard/internal/health"
)

func realStore(t *testing.T, url, pass, replica string) *Store {
	t.Helper()
	ep, err := ParseURL(url, pass)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(ep, Settings{Name: "real", Replica: replica, Live: 5 * time.Second, Phases: []string{"Healthy", "Ejected"}})
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

	k := health.Key{Channel: "ns/ch", Model: "gpt-4o"}
	mustSync(t, a, now, Report{
		Phases:  []Phase{{Key: "ns/ch|gpt-4o", Phase: "Ejected"}},
		Clients: []ClientUse{{Client: "team/app", Requests: 2, Tokens: 20}},
		Health: &HealthReport{
			Reports:   []health.FleetReport{{Key: k, Counts: health.FleetCounts{Requests: 7, Failures: 7}, Phase: health.PhaseEjected, WantsProbeLease: true}},
			Proposals: []health.FleetVerdict{{Key: k, Phase: health.PhaseEjected, Until: now.Add(time.Minute), Reason: "ErrorRateExceeded"}},
		},
	})
	v := mustSync(t, b, now, Report{
		Phases:      []Phase{{Key: "ns/ch|gpt-4o", Phase: "Healthy"}},
		Clients:     []ClientUse{{Client: "team/app", Requests: 1, Tokens: 5}},
		ReadClients: []string{"team/app"},
		Health:      &HealthReport{Proposals: []health.FleetVerdict{{Key: k, Phase: health.PhaseEjected, Until: now.Add(time.Minute)}}},
	})
	if got := v.Phases["ns/ch|gpt-4o"]; got["Ejected"] != 1 || got["Healthy"] != 1 {
		t.Errorf("b sees phases %v", got)
	}
	if len(v.Inputs) != 1 || v.Inputs[0].Others.Failures != 7 || v.Inputs[0].Verdict == nil || v.Inputs[0].Verdict.By != "a" ||
		!v.Inputs[0].ProbeLeaseHeld || v.Inputs[0].HoldsProbeLease {
		t.Errorf("b sees inputs %+v", v.Inputs)
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
