package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-io/switchyard/internal/fleet/redistest"
	"github.com/switchyard-io/switchyard/internal/health"
)

// boardSequence plays n random exchanges of 6 replicas over 3 keys against health.FleetBoard
// and b, and fails at the first input that differs. Some replicas pause for longer than the
// fade-out (3 intervals) and come back, so the store's lazy subtraction of stale replicas and
// its running sums across re-reports are both played; the sequence fails if it played neither.
func boardSequence(t *testing.T, b health.Board, seed uint64, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	const interval = time.Second
	ref := health.NewFleetBoard(interval)
	keys := []health.Key{{Channel: "llm/a", Model: "gpt-4o"}, {Channel: "llm/b", Model: "gpt-4o"}, {Channel: "llm/a", Model: "o3"}}
	replicas := []string{"r0", "r1", "r2", "r3", "r4", "r5"}
	last := map[string]time.Time{}
	var faded, rereported int
	now := time.UnixMilli(1_780_000_000_000)
	versions := map[health.Key]uint64{}
	for i := range n {
		now = now.Add(time.Duration(rng.IntN(700)) * time.Millisecond)
		// Replicas r4 and r5 exchange rarely: often they have faded out when they come back.
		rep := replicas[rng.IntN(len(replicas))]
		if (rep == "r4" || rep == "r5") && rng.IntN(4) != 0 {
			rep = replicas[rng.IntN(4)]
		}
		if at, ok := last[rep]; ok {
			if now.Sub(at) > 3*interval {
				faded++
			} else {
				rereported++
			}
		}
		last[rep] = now
		var reports []health.FleetReport
		for _, k := range keys {
			if rng.IntN(3) == 0 {
				continue
			}
			r := health.FleetReport{Key: k, Phase: health.Phase(rng.IntN(6)), TrafficPercent: rng.IntN(101)}
			r.Counts.Requests = rng.IntN(40)
			r.Counts.Failures = rng.IntN(r.Counts.Requests + 1)
			r.Counts.Timeouts = rng.IntN(r.Counts.Failures + 1)
			r.Counts.Latency[rng.IntN(health.LatencyBins)] = uint32(rng.IntN(5))
			if rng.IntN(3) == 0 {
				r.Streak, r.StreakStart = 1+rng.IntN(6), now.Add(-time.Duration(rng.IntN(5000))*time.Millisecond)
			}
			if rng.IntN(2) == 0 {
				r.LastSuccess = now.Add(-time.Duration(rng.IntN(9000)) * time.Millisecond)
			}
			r.WantsProbeLease = rng.IntN(3) == 0
			if rng.IntN(4) == 0 {
				r.RetryAfterUntil = now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
			}
			reports = append(reports, r)
		}
		var props []health.FleetVerdict
		if rng.IntN(3) == 0 {
			k := keys[rng.IntN(len(keys))]
			v := health.FleetVerdict{Key: k, Phase: health.PhaseEjected, Until: now.Add(time.Duration(rng.IntN(4000)) * time.Millisecond),
				Reason: "ErrorRateExceeded", Message: "error rate 100% (9/9)"}
			if rng.IntN(2) == 0 {
				v.Prev = versions[k] + uint64(rng.IntN(2)) // the held one, or one never held
				v.Phase, v.Step, v.StepStart = health.PhaseRampingUp, 1, now
			}
			props = append(props, v)
		}
		want, _ := ref.Exchange(now, rep, reports, props)
		got, err := b.Exchange(now, rep, reports, props)
		if err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
		if d := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }), cmp.Comparer(sameTop)); d != "" {
			t.Fatalf("exchange %d (seed %d) of %s at %s: the store differs from FleetBoard (-board +store):\n%s", i, seed, rep, now.Format(time.StampMilli), d)
		}
		for _, in := range want {
			if in.Verdict != nil {
				versions[in.Key] = in.Verdict.Version
			}
		}
	}
	if faded == 0 || rereported == 0 {
		t.Fatalf("seed %d: %d returns after a fade-out and %d re-reports: the sequence did not play both", seed, faded, rereported)
	}
}

// sameTop compares two FleetTops; of Slow, the figures the engine reads (samples above the limit
// and in all): between replicas tied on both, FleetBoard keeps whichever its map iteration met
// first, so the bins of a tie are not determined.
func sameTop(a, b health.FleetTop) bool {
	sa, sb := health.FleetCounts{Latency: a.Slow}, health.FleetCounts{Latency: b.Slow}
	if sa.Slow() != sb.Slow() || sa.Samples() != sb.Samples() {
		return false
	}
	a.Slow, b.Slow = [health.LatencyBins]uint32{}, [health.LatencyBins]uint32{}
	return a == b
}

func TestStoreMatchesBoard(t *testing.T) {
	for seed := range uint64(8) {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DisableIdentity: true})
		boardSequence(t, NewBoard(rdb, "test", time.Second), seed, 150)
		rdb.Close()
	}
}

func TestStoreMatchesBoardOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	for seed := range uint64(5) {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DisableIdentity: true})
		rdb.FlushAll(t.Context())
		boardSequence(t, NewBoard(rdb, "test", time.Second), 100+seed, 150)
		rdb.Close()
	}
}

// miniBoard is a Board on a fresh miniredis, interval 1s.
func miniBoard(t *testing.T) *Board {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { rdb.Close() })
	return NewBoard(rdb, "test", time.Second)
}

var (
	bk = health.Key{Channel: "llm/a", Model: "gpt-4o"}
	bt = time.UnixMilli(1_780_000_000_000)
)

func exchange(t *testing.T, b *Board, at time.Duration, replica string, reports []health.FleetReport, props ...health.FleetVerdict) health.FleetInput {
	t.Helper()
	ins, err := b.Exchange(bt.Add(at), replica, reports, props)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if in.Key == bk {
			return in
		}
	}
	return health.FleetInput{}
}

func failing(n int) []health.FleetReport {
	return []health.FleetReport{{Key: bk, Counts: health.FleetCounts{Requests: n, Failures: n}, Streak: n, StreakStart: bt, Phase: health.PhaseHealthy}}
}

func TestSyncSumsTheOtherReplicasReports(t *testing.T) {
	b := miniBoard(t)
	exchange(t, b, 0, "a", failing(3))
	exchange(t, b, 0, "b", failing(4))
	in := exchange(t, b, 0, "c", nil)
	if in.Replicas != 2 || in.Others.Requests != 7 || in.Others.Failures != 7 || in.Streak != 7 || in.Top.Failures != 4 {
		t.Fatalf("c sees %+v, want a's and b's counts summed, b on top", in)
	}
	// A newer report replaces the replica's older one (counts are window snapshots), and a
	// replica never sees its own.
	in = exchange(t, b, 100*time.Millisecond, "a", failing(5))
	if in.Replicas != 1 || in.Others.Failures != 4 {
		t.Fatalf("a sees %+v, want b's 4 only", in)
	}
	if in := exchange(t, b, 100*time.Millisecond, "c", nil); in.Others.Failures != 9 {
		t.Fatalf("c sees %d failures, want a's latest 5 + b's 4", in.Others.Failures)
	}
}

func TestStaleReportsFadeOut(t *testing.T) {
	b := miniBoard(t)
	exchange(t, b, 0, "a", failing(5))
	if in := exchange(t, b, 2*time.Second, "b", nil); in.Others.Failures != 5 {
		t.Fatalf("2s later b sees %d failures, want a's 5", in.Others.Failures)
	}
	// a went away: 3 intervals after its last exchange its reports no longer count.
	if in := exchange(t, b, 3100*time.Millisecond, "b", nil); in.Others.Failures != 0 || in.Replicas != 0 {
		t.Fatalf("3.1s later b still sees a: %+v", in)
	}
	// A replica that reports nothing more (its key went quiet) stops counting at once.
	exchange(t, b, 4*time.Second, "a", failing(5))
	exchange(t, b, 4500*time.Millisecond, "a", nil)
	if in := exchange(t, b, 4500*time.Millisecond, "b", nil); in.Others.Failures != 0 {
		t.Fatalf("a's key is quiet, yet b sees %+v", in)
	}
}

func TestFirstVerdictWinsThenCompareAndSet(t *testing.T) {
	b := miniBoard(t)
	eject := func(by string) health.FleetVerdict {
		return health.FleetVerdict{Key: bk, Phase: health.PhaseEjected, Until: bt.Add(time.Minute), Reason: "ByRule" + by}
	}
	exchange(t, b, 0, "a", nil, eject("a"))
	in := exchange(t, b, 0, "b", nil, eject("b"))
	if in.Verdict == nil || in.Verdict.By != "a" || in.Verdict.Reason != "ByRulea" {
		t.Fatalf("held %+v, want a's: the first trip wins", in.Verdict)
	}
	v1 := in.Verdict.Version
	ramp := health.FleetVerdict{Key: bk, Phase: health.PhaseRampingUp, Until: bt.Add(time.Minute), Step: 1, StepStart: bt, Prev: v1 + 1}
	if in := exchange(t, b, 0, "b", nil, ramp); in.Verdict.Phase != health.PhaseEjected {
		t.Fatalf("a compare-and-set on a version never held replaced the verdict: %+v", in.Verdict)
	}
	ramp.Prev = v1
	in = exchange(t, b, 0, "b", nil, ramp)
	if in.Verdict.Phase != health.PhaseRampingUp || in.Verdict.By != "b" || in.Verdict.Version <= v1 || !in.Verdict.StepStart.Equal(bt) {
		t.Fatalf("compare-and-set on the held version: %+v", in.Verdict)
	}
	// A verdict ends at its Until, and its version is never given again.
	if in := exchange(t, b, time.Minute, "a", nil); in.Verdict != nil {
		t.Fatalf("a verdict outlived its Until: %+v", in.Verdict)
	}
	again := eject("a")
	again.Until = bt.Add(2 * time.Minute)
	if in := exchange(t, b, time.Minute, "a", nil, again); in.Verdict == nil || in.Verdict.Version <= v1+1 {
		t.Fatalf("a new verdict reused a version: %+v", in.Verdict)
	}
}

func TestOneProbeLeaseForTheFleet(t *testing.T) {
	b := miniBoard(t)
	wants := []health.FleetReport{{Key: bk, Phase: health.PhaseProbing, WantsProbeLease: true}}
	if in := exchange(t, b, 0, "a", wants); !in.HoldsProbeLease {
		t.Fatalf("a asked first and does not hold the lease: %+v", in)
	}
	if in := exchange(t, b, 0, "b", wants); in.HoldsProbeLease || !in.ProbeLeaseHeld {
		t.Fatalf("b got the lease a holds: %+v", in)
	}
	// a renews it every interval: it keeps it as long as it asks.
	for i := 1; i <= 4; i++ {
		if in := exchange(t, b, time.Duration(i)*time.Second, "a", wants); !in.HoldsProbeLease {
			t.Fatalf("renewal %d: a lost the lease", i)
		}
	}
	// a's next exchange comes a little late and b asks just before it: a keeps the lease (handing
	// it over would make b probe at once, one probe more for the fleet).
	if in := exchange(t, b, 5050*time.Millisecond, "b", wants); in.HoldsProbeLease {
		t.Fatalf("b took the lease from a holder 50ms late: %+v", in)
	}
	if in := exchange(t, b, 5100*time.Millisecond, "a", wants); !in.HoldsProbeLease {
		t.Fatalf("a lost the lease to a late renewal: %+v", in)
	}
	// a stops asking: the next asker gets it at once.
	exchange(t, b, 6*time.Second, "a", nil)
	if in := exchange(t, b, 6*time.Second, "b", wants); !in.HoldsProbeLease {
		t.Fatalf("after a let go, b does not hold the lease: %+v", in)
	}
	// b goes away without a word: a waits while the lease holds (two intervals), then gets it.
	if in := exchange(t, b, 7900*time.Millisecond, "a", wants); in.HoldsProbeLease {
		t.Fatalf("a took b's lease before two intervals: %+v", in)
	}
	if in := exchange(t, b, 8100*time.Millisecond, "a", wants); !in.HoldsProbeLease {
		t.Fatalf("b's lease outlived two intervals: %+v", in)
	}
}

func TestLatestRetryAfterAppliesToTheFleet(t *testing.T) {
	b := miniBoard(t)
	limited := func(until time.Duration) []health.FleetReport {
		return []health.FleetReport{{Key: bk, Phase: health.PhaseRateLimited, RetryAfterUntil: bt.Add(until)}}
	}
	exchange(t, b, 0, "a", limited(30*time.Second))
	if in := exchange(t, b, 0, "b", nil); !in.RetryAfterUntil.Equal(bt.Add(30 * time.Second)) {
		t.Fatalf("b sees Retry-After until %v, want a's", in.RetryAfterUntil)
	}
	// The latest end wins; an earlier one does not shorten it.
	exchange(t, b, time.Second, "b", limited(10*time.Second))
	if in := exchange(t, b, time.Second, "c", nil); !in.RetryAfterUntil.Equal(bt.Add(30 * time.Second)) {
		t.Fatalf("c sees %v, want the latest end", in.RetryAfterUntil)
	}
	if in := exchange(t, b, 30*time.Second, "c", nil); !in.RetryAfterUntil.IsZero() {
		t.Fatalf("an ended Retry-After is still shared: %v", in.RetryAfterUntil)
	}
}

// replyBytes counts the bytes of the board script's replies, for the size test and the
// benchmark.
type replyBytes struct{ n int }

func (h *replyBytes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *replyBytes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if c, ok := cmd.(*redis.Cmd); ok {
			if s, ok := c.Val().(string); ok {
				h.n += len(s)
			}
		}
		return err
	}
}
func (h *replyBytes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// fleetOf has replicas exchange once each at now, every one reporting keys keys with evidence,
// on a board whose replies h counts.
func fleetOf(tb testing.TB, replicas, keys int) (*Board, *replyBytes) {
	tb.Helper()
	m := miniredis.RunT(tb)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DisableIdentity: true})
	tb.Cleanup(func() { rdb.Close() })
	h := &replyBytes{}
	rdb.AddHook(h)
	b := NewBoard(rdb, "test", time.Second)
	for r := range replicas {
		if _, err := b.Exchange(bt, fmt.Sprintf("r%03d", r), outage(keys, r), nil); err != nil {
			tb.Fatal(err)
		}
	}
	return b, h
}

// outage is replica r's reports of keys keys that all fail.
func outage(keys, r int) []health.FleetReport {
	out := make([]health.FleetReport, keys)
	for i := range out {
		out[i] = health.FleetReport{Key: health.Key{Channel: fmt.Sprintf("llm/c%02d", i), Model: "gpt-4o"},
			Counts: health.FleetCounts{Requests: 9, Failures: 5 + r%3, Timeouts: 1}, Streak: 2, StreakStart: bt, LastSuccess: bt,
			Phase: health.PhaseHealthy}
		out[i].Counts.Latency[50] = 3
	}
	return out
}

// TestReplySizeDoesNotGrowWithReplicas: one replica's reply for 3 keys at 50 replicas is about
// the size it is at 5 (the sums gain a digit or so); reading every other replica's reports, as
// the store did before its per-key sums, made it 10 times larger.
func TestReplySizeDoesNotGrowWithReplicas(t *testing.T) {
	size := func(replicas int) int {
		b, h := fleetOf(t, replicas, 3)
		h.n = 0
		if _, err := b.Exchange(bt.Add(time.Second), "r000", outage(3, 0), nil); err != nil {
			t.Fatal(err)
		}
		return h.n
	}
	small, large := size(5), size(50)
	if small == 0 || large > small+small/10 {
		t.Fatalf("reply of %d bytes at 5 replicas, %d at 50: it grows with the replicas", small, large)
	}
}

// BenchmarkExchange: one replica's exchange during an outage of 50 keys that every replica
// reports, at 10 and 200 replicas; reply-B/op is the script's reply.
func BenchmarkExchange(b *testing.B) {
	for _, replicas := range []int{10, 200} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			board, h := fleetOf(b, replicas, 50)
			h.n = 0
			b.ResetTimer()
			for i := range b.N {
				// Round robin within one interval: no replica fades out.
				r := i % replicas
				at := bt.Add(time.Duration(i) * time.Second / time.Duration(replicas))
				if _, err := board.Exchange(at, fmt.Sprintf("r%03d", r), outage(50, r), nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(h.n)/float64(b.N), "reply-B/op")
		})
	}
}
