package health

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// benchEngine configures 16 channels × 4 models with chat settings and a minute of traffic.
func benchEngine(b *testing.B) (*Engine, []Key) {
	e := NewEngine(0)
	var targets []Target
	var keys []Key
	for c := range 16 {
		for m := range 4 {
			k := Key{Channel: fmt.Sprintf("channel-%02d", c), Model: fmt.Sprintf("model-%d", m)}
			keys = append(keys, k)
			targets = append(targets, Target{Key: k, Settings: DefaultSettings("chat")})
		}
	}
	e.Configure(t0, targets)
	for i := range 60 * 1000 {
		e.Observe(keys[i%len(keys)], benchObservation(i))
	}
	if n := len(e.Events(0)); n != 0 {
		b.Fatalf("warm-up traffic caused %d transitions", n)
	}
	return e, keys
}

// benchObservation is the i-th attempt of a steady, healthy stream: 1000 attempts/s over all
// keys, 1% server errors spread out, latencies between 200 ms and 2.2 s.
func benchObservation(i int) Observation {
	o := Observation{At: t0.Add(time.Duration(i) * time.Millisecond), Outcome: OutcomeSuccess,
		Latency: time.Duration(200+i%2000) * time.Millisecond}
	if i%101 == 100 {
		o.Outcome = OutcomeServerError
	}
	return o
}

func BenchmarkObserve(b *testing.B) {
	e, keys := benchEngine(b)
	i := 60 * 1000
	b.ReportAllocs()
	for b.Loop() {
		e.Observe(keys[i%len(keys)], benchObservation(i))
		i++
	}
	if n := len(e.Events(0)); n != 0 {
		b.Fatalf("steady traffic caused %d transitions", n)
	}
}

func benchSelect(b *testing.B) {
	e, _ := benchEngine(b)
	cands := []Candidate{{Channel: "channel-00", Weight: 100}, {Channel: "channel-01", Weight: 50}, {Channel: "channel-02", Weight: 100}}
	dst := make([]Route, 0, 8)
	now := t0.Add(time.Minute)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		dst = e.Select(now.Add(time.Duration(i)*time.Millisecond), "model-1", cands, StrategyHealthScore, true, float64(i%1000)/1000, dst)
		i++
	}
	if len(dst) != 3 {
		b.Fatalf("routes %+v", dst)
	}
}

func BenchmarkSelect(b *testing.B) { benchSelect(b) }

// BenchmarkRoutable is BenchmarkSelect under the name the issue uses for "which channels may I use".
func BenchmarkRoutable(b *testing.B) { benchSelect(b) }

// BenchmarkGCWith5000Keys is one full garbage collection with 5,000 channel×models configured
// (the bench's scale configuration): what every GC cycle costs in marking the engine's state.
// It is the measure behind keeping state's pointer-free window last (TestStateWindowIsNotScannedByTheGC).
func BenchmarkGCWith5000Keys(b *testing.B) {
	e := NewEngine(0)
	targets := make([]Target, 0, 5000)
	for c := range 1000 {
		for m := range 5 {
			targets = append(targets, Target{Key: Key{Channel: fmt.Sprintf("channel-%04d", c), Model: fmt.Sprintf("model-%04d-%d", c/5, m)}, Settings: DefaultSettings("chat")})
		}
	}
	e.Configure(t0, targets)
	runtime.GC()
	b.ResetTimer()
	for b.Loop() {
		runtime.GC()
	}
	runtime.KeepAlive(e)
}

// BenchmarkSweepsWith5000Keys is one round of the proxy's background work (Tick, ProbesDue,
// Updates, every 250 ms) with 5,000 channel×models configured, of which one model's five take
// traffic: sweep=all visits every key, as the sweeps did before they skipped the keys at rest
// (TestSweepsSkipKeysAtRest), sweep=active is the engine as it is. An op is one round with the
// 250 requests before it (1,000 req/s); sweep-ns is the round's own time.
func BenchmarkSweepsWith5000Keys(b *testing.B) {
	for _, all := range []bool{true, false} {
		name := "sweep=active"
		if all {
			name = "sweep=all"
		}
		b.Run(name, func(b *testing.B) {
			e := NewEngine(0)
			e.sweepAll = all
			targets := make([]Target, 0, 5000)
			for c := range 1000 {
				for m := range 5 {
					targets = append(targets, Target{Key: Key{Channel: fmt.Sprintf("channel-%04d", c), Model: fmt.Sprintf("model-%04d-%d", c/5, m)}, Settings: DefaultSettings("chat")})
				}
			}
			e.Configure(t0, targets)
			var cands []Candidate
			for c := 500; c < 505; c++ {
				cands = append(cands, Candidate{Channel: fmt.Sprintf("channel-%04d", c), Weight: 100})
			}
			model := "model-0100-2"
			var routes []Route
			var sts []Status
			var due []Key
			now := t0
			i := 0
			var sweep time.Duration
			b.ReportAllocs()
			for b.Loop() {
				for range 250 {
					now = now.Add(time.Millisecond)
					routes = e.Select(now, model, cands, StrategyHealthScore, true, float64(i%1000)/1000, routes)
					e.Observe(Key{Channel: routes[0].Channel, Model: model}, benchObservation(i))
					i++
				}
				start := time.Now()
				e.Tick(now)
				due = e.ProbesDue(now, due[:0])
				sts = e.Updates(now, sts[:0])
				sweep += time.Since(start)
			}
			b.ReportMetric(float64(sweep.Nanoseconds())/float64(b.N), "sweep-ns")
			if len(sts) == 0 || !all && len(sts) > 5 || all && len(sts) != 5000 {
				b.Fatalf("%d statuses updated", len(sts))
			}
		})
	}
}
