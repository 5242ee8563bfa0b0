package fleet

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-io/switchyard/internal/health"
)

// recorder is a Peer that sends a fixed report and remembers what it was told.
type recorder struct {
	mu      sync.Mutex
	report  Report
	views   []View
	alone   int
	reports int
}

func (r *recorder) Report(time.Time) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports++
	return r.report
}

func (r *recorder) Adopt(_ time.Time, v View) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.views = append(r.views, v)
}

func (r *recorder) Alone(time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alone++
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestLocalModeAfterErrorsAndRejoin(t *testing.T) {
	m := newMini(t)
	store := miniStore(t, m, "a")
	peer := &recorder{report: Report{Clients: []ClientUse{{Client: "c", Requests: 1}}}}
	clk := &clock{now: t0}
	var logs bytes.Buffer
	metrics := NewMetrics(prometheus.NewRegistry())
	s := NewSyncer(store, peer, SyncerOptions{Name: "test", Now: clk.Now, Metrics: metrics,
		Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	ctx := context.Background()

	if s.Connected() || s.Link().Reason == "" {
		t.Fatalf("before the first sync the link is %+v, want local with a reason", s.Link())
	}
	if !s.Step(ctx) || !s.Connected() || testutil.ToFloat64(metrics.Connected) != 1 || testutil.ToFloat64(metrics.Replicas) != 1 {
		t.Fatalf("after a sync that worked: %+v", s.Link())
	}
	m.SetError("LOADING the store is down")
	// Errors for less than LocalAfter: still connected, the deltas kept for the next sync.
	for range 3 {
		clk.Add(time.Second)
		if s.Step(ctx) {
			t.Fatal("a sync against a failing store worked")
		}
	}
	if !s.Connected() || peer.alone != 0 {
		t.Fatalf("after 2s of errors the replica is local already: %+v", s.Link())
	}
	if n := s.pending.Clients[0].Requests; n != 3 {
		t.Errorf("pending use %d, want the 3 failed syncs' 3", n)
	}
	clk.Add(time.Second)
	s.Step(ctx)
	link := s.Link()
	if link.Connected || !strings.Contains(link.Reason, "the store is down") || peer.alone != 1 || testutil.ToFloat64(metrics.Connected) != 0 {
		t.Fatalf("after 3s of errors: link %+v, alone %d; want local mode with the error as reason", link, peer.alone)
	}
	if got := testutil.ToFloat64(metrics.SyncErrors); got != 4 {
		t.Errorf("sync errors %v, want 4", got)
	}
	// Still failing: no second transition, no second log line; nothing piles up.
	clk.Add(time.Second)
	s.Step(ctx)
	if peer.alone != 1 || len(s.pending.Clients) != 0 {
		t.Errorf("alone %d, pending %d; want one transition and no use kept in local mode", peer.alone, len(s.pending.Clients))
	}
	m.SetError("")
	clk.Add(time.Second)
	if !s.Step(ctx) || !s.Connected() {
		t.Fatalf("the store answers again but the replica did not rejoin: %+v", s.Link())
	}
	lines := strings.Count(logs.String(), "Lost the fleet store")
	joins := strings.Count(logs.String(), "Joined the fleet store")
	if lines != 1 || joins != 2 {
		t.Errorf("log lines: %d lost, %d joined; want 1 and 2:\n%s", lines, joins, logs.String())
	}
}

// TestNoSyncWaitsLongerThanItsDeadline: a store that accepts connections and never answers
// (SIGSTOP, a partition) fails a sync within CallTimeout.
func TestNoSyncWaitsLongerThanItsDeadline(t *testing.T) {
	m := newMini(t)
	ep, _ := ParseURL("redis://"+m.Addr(), "")
	slow := NewStore(ep, Settings{Name: "test", Replica: "a"})
	defer slow.Close()
	// Hold the server: miniredis serves one command at a time under its lock.
	m.Lock()
	start := time.Now()
	_, err := slow.Sync(context.Background(), t0, Report{})
	m.Unlock()
	if err == nil {
		t.Fatal("a sync against a held server worked")
	}
	if d := time.Since(start); d > CallTimeout+300*time.Millisecond {
		t.Errorf("the sync waited %v, want at most about %v", d, CallTimeout)
	}
}

func TestJoinReadsFleetStateBeforeServing(t *testing.T) {
	m := newMini(t)
	a := miniStore(t, m, "a")
	k := health.Key{Channel: "llm/a", Model: "gpt-4o"}
	mustSync(t, a, t0, Report{Health: &HealthReport{
		Reports:   []health.FleetReport{{Key: k, Phase: health.PhaseEjected, RetryAfterUntil: t0.Add(20 * time.Second)}},
		Proposals: []health.FleetVerdict{{Key: k, Phase: health.PhaseEjected, Until: t0.Add(time.Minute)}}}})
	peer := &recorder{report: Report{Health: &HealthReport{}}}
	s := NewSyncer(miniStore(t, m, "b"), peer, SyncerOptions{Name: "test", Now: func() time.Time { return t0 }})
	if err := s.Join(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if len(peer.views) != 1 || len(peer.views[0].Inputs) != 1 {
		t.Fatalf("after Join the replica adopted %+v, want a's key", peer.views)
	}
	in := peer.views[0].Inputs[0]
	if in.Verdict == nil || in.Verdict.By != "a" || !in.RetryAfterUntil.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("after Join the input is %+v, want a's verdict and Retry-After", in)
	}
	// Against a store that never answers, Join gives up within its bound.
	m.SetError("down")
	c := NewSyncer(miniStore(t, m, "c"), &recorder{}, SyncerOptions{Name: "test"})
	start := time.Now()
	err := c.Join(context.Background(), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "down") {
		t.Fatalf("Join against a failing store: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Join took %v, want about 300ms", d)
	}
}

func TestMergeKeepsTheUseOfFailedSyncs(t *testing.T) {
	old := Report{Clients: []ClientUse{{Client: "c", Requests: 1, Tokens: 10}, {Client: "d", Requests: 1}}}
	next := Report{Clients: []ClientUse{{Client: "c", Requests: 2}}}
	got := mergeReports(old, next)
	if len(got.Clients) != 2 || got.Clients[0] != (ClientUse{Client: "c", Requests: 3, Tokens: 10}) || got.Clients[1].Client != "d" {
		t.Errorf("merged %+v", got.Clients)
	}
	if next.Clients[0].Requests != 2 {
		t.Errorf("merge changed its input: %+v", next.Clients)
	}
}
