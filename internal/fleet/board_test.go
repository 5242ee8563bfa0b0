package fleet

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-io/switchyard/internal/fleet/redistest"
	"github.com/switchyard-io/switchyard/internal/health"
)

// boardSequence plays n random exchanges of 4 replicas over 3 keys against health.FleetBoard
// and b, and fails at the first input that differs.
func boardSequence(t *testing.T, b health.Board, seed uint64, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	const interval = time.Second
	ref := health.NewFleetBoard(interval)
	keys := []health.Key{{Channel: "llm/a", Model: "gpt-4o"}, {Channel: "llm/b", Model: "gpt-4o"}, {Channel: "llm/a", Model: "o3"}}
	replicas := []string{"r0", "r1", "r2", "r3"}
	now := time.UnixMilli(1_780_000_000_000)
	versions := map[health.Key]uint64{}
	for i := range n {
		now = now.Add(time.Duration(rng.IntN(700)) * time.Millisecond)
		rep := replicas[rng.IntN(len(replicas))]
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
	for seed := range uint64(20) {
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
