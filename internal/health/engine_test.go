package health

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// scenario drives three channels and two models through 40 minutes of mixed traffic: incidents,
// 429 storms, latency drift, an operator override, probes. tickEvery is how often Tick runs.
func scenario(tickEvery time.Duration) []Event {
	set := chat()
	keys := []Key{kA, kB, kC, {Channel: kA.Channel, Model: "gpt-4o-mini"}}
	e := NewEngine(4096)
	var targets []Target
	for _, k := range keys {
		targets = append(targets, Target{Key: k, Settings: set})
	}
	e.Configure(t0, targets)
	rng := rand.New(rand.NewPCG(1, 2))
	nextTick := t0
	for at := t0; at.Before(t0.Add(40 * time.Minute)); at = at.Add(100 * time.Millisecond) {
		for !nextTick.After(at) {
			e.Tick(nextTick)
			nextTick = nextTick.Add(tickEvery)
		}
		min := int(at.Sub(t0) / time.Minute)
		if min == 20 && at.Equal(t0.Add(20*time.Minute)) {
			targets[1].Disabled, targets[1].DisabledUntil, targets[1].DisabledReason = true, at.Add(5*time.Minute), "drill"
			e.Configure(at, targets)
		}
		for _, k := range e.ProbesDue(at, nil) {
			o := Observation{At: at, Outcome: OutcomeSuccess, Latency: time.Duration(rng.IntN(3000)) * time.Millisecond, Probe: true}
			if rng.IntN(10) == 0 {
				o.Outcome = OutcomeTimeout
			}
			e.Observe(k, o)
		}
		k := keys[rng.IntN(len(keys))]
		o := Observation{At: at, Outcome: OutcomeSuccess, Latency: time.Duration(500+rng.IntN(1500)) * time.Millisecond}
		bad := (k == kA && min%10 < 3) || (k == kC && min >= 30)
		switch r := rng.IntN(100); {
		case bad && r < 40:
			o.Outcome = []Outcome{OutcomeServerError, OutcomeTimeout, OutcomeConnectionError, OutcomeStreamCut}[r%4]
		case k == kB && min%7 == 0 && r < 50:
			o.Outcome, o.RetryAfter = OutcomeRateLimited, time.Duration(r%4)*time.Second
		case r < 2:
			o.Outcome = OutcomeServerError
		case r < 4:
			o.Outcome = OutcomeClientError
		case k.Model == "gpt-4o-mini" && min >= 12:
			o.Latency *= 4
		}
		e.Observe(k, o)
	}
	e.Tick(t0.Add(40 * time.Minute))
	return e.Events(0)
}

func TestDeterminism(t *testing.T) {
	a, b := scenario(time.Second), scenario(time.Second)
	if len(a) < 20 {
		t.Fatalf("scenario too quiet to prove anything: %d events", len(a))
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same input gave different journals")
	}
	// Transitions are stamped when due, so the Tick cadence must not matter either.
	if c := scenario(37 * time.Second); !reflect.DeepEqual(a, c) {
		for i := range min(len(a), len(c)) {
			if !reflect.DeepEqual(a[i], c[i]) {
				t.Fatalf("Tick every 37s diverges at event %d:\n 1s:  %+v\n 37s: %+v", i, a[i], c[i])
			}
		}
		t.Fatalf("Tick every 37s gave %d events, every 1s %d", len(c), len(a))
	}
	seen := map[string]bool{}
	for _, ev := range a {
		seen[ev.Reason] = true
	}
	for _, r := range []string{"ConsecutiveFailures", "CooldownElapsed", "ProbesPassed", "RampStep", "RateLimited", "Disabled", "Enabled"} {
		if !seen[r] {
			t.Errorf("scenario never produced %s; got %v", r, seen)
		}
	}
}

func TestJournal(t *testing.T) {
	e := NewEngine(4)
	e.Configure(t0, []Target{{Key: kA, Settings: chat()}})
	if evs := e.Events(0); evs != nil {
		t.Fatalf("fresh journal %+v", evs)
	}
	// 6 transitions: Disabled, Enabled, Disabled, Enabled, Disabled, Enabled.
	for i := range 6 {
		e.Configure(t0.Add(time.Duration(i)*time.Second), []Target{{Key: kA, Settings: chat(), Disabled: i%2 == 0}})
	}
	all := e.Events(0)
	if len(all) != 4 || all[0].Seq != 3 || all[3].Seq != 6 {
		t.Fatalf("ring of 4 after 6 events: %+v", all)
	}
	if since := e.Events(4); len(since) != 2 || since[0].Seq != 5 || since[1].Seq != 6 {
		t.Errorf("Events(4) = %+v, want seq 5 and 6", since)
	}
	if since := e.Events(6); len(since) != 0 {
		t.Errorf("Events(6) = %+v, want none", since)
	}
	for i, ev := range all {
		if ev.Actor != "operator" || ev.Channel != kA.Channel || ev.Model != kA.Model || !ev.At.Equal(t0.Add(time.Duration(i+2)*time.Second)) {
			t.Errorf("event %+v", ev)
		}
	}
}

func TestConfigure(t *testing.T) {
	set := chat()
	e := newEngine(t, set, kA, kB)
	ejected := eject(t, e, kA, t0)
	now := ejected.Add(time.Second)

	// Reload: kA keeps its state, kB is dropped, kC is new; a changed threshold keeps the window.
	set2 := set
	set2.ErrorRatePercent = 40
	e.Configure(now, []Target{{Key: kA, Settings: set2}, {Key: kC, Settings: set}})
	st := e.Status(now)
	if len(st) != 2 || st[0].Key != kA || st[1].Key != kC {
		t.Fatalf("status after reload %+v, want kA and kC", st)
	}
	if st[0].Phase != PhaseEjected || st[0].WindowRequests != 5 || st[1].Phase != PhaseHealthy {
		t.Errorf("after reload: %+v", st)
	}
	// A changed window restarts it empty; the phase stays.
	set3 := set2
	set3.Window = 2 * time.Minute
	e.Configure(now, []Target{{Key: kA, Settings: set3}})
	if st := status(t, e, now, kA); st.Phase != PhaseEjected || st.WindowRequests != 0 {
		t.Errorf("after a window change: %+v", st)
	}
	// Invalid settings fall back to the chat profile instead of running on nonsense.
	bad := set
	bad.Window = 0
	e.Configure(now, []Target{{Key: kB, Settings: bad}})
	if st := status(t, e, now, kB); st.Phase != PhaseHealthy {
		t.Errorf("key with invalid settings: %+v", st)
	}
}

// TestStateSize checks what one channel×model costs on the heap, allocator rounding included:
// with thousands of keys it is most of a proxy's memory. The figure is computed from the types and
// the configured ring, rounded the way the allocator rounds (heapBytes), so it is the same on every
// run; BenchmarkStateSize measures the same figure on the heap and reports it. Budgets: chat 6 KiB,
// batch 10 KiB (the figures are 6,144 and 9,472 bytes today).
func TestStateSize(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		budget   uintptr
	}{{"chat", 6 << 10}, {"batch", 10 << 10}} {
		set := DefaultSettings(tc.scenario)
		s := newState(Key{Channel: "c", Model: "m"}, set, t0.UnixNano())
		// newState makes exactly two objects: the state and its count ring. A third would not be in
		// the figure below. AllocsPerRun floors mallocs/runs, so a stray allocation elsewhere in the
		// process during the 100 runs does not change the count.
		if n := testing.AllocsPerRun(100, func() { newState(Key{Channel: "c", Model: "m"}, set, t0.UnixNano()) }); n != 2 {
			t.Fatalf("%s: newState allocates %v objects, want 2 (state and count ring)", tc.scenario, n)
		}
		ring := uintptr(len(s.win.slots)) * unsafe.Sizeof(counts{})
		per := heapBytes(unsafe.Sizeof(state{}), true) + heapBytes(ring, false)
		t.Logf("%s: %d bytes per channel×model on the heap (state %d, count ring %d, latency ring %d)",
			tc.scenario, per, unsafe.Sizeof(state{}), ring, unsafe.Sizeof(window{}.slices))
		if per > tc.budget {
			t.Errorf("%s: %d bytes per key, want <= %d", tc.scenario, per, tc.budget)
		}
	}
}

// heapBytes is what the allocator takes for one object of size bytes: its size class. Since Go
// 1.22 an object with pointers larger than 512 bytes also carries an 8-byte header that counts
// towards its class. The class itself is read off the runtime, not a copied table: append grows a
// nil byte slice to exactly the size class of what it allocates (runtime.roundupsize).
func heapBytes(size uintptr, pointers bool) uintptr {
	if pointers && size > 512 {
		size += 8
	}
	return uintptr(cap(append([]byte(nil), make([]byte, size)...)))
}

// BenchmarkStateSize measures on the heap what TestStateSize computes, as bytes/key: the two must
// agree, and when they do not, heapBytes has gone out of date with the runtime. It is a benchmark
// because whatever else the process allocates meanwhile lands in the figure.
func BenchmarkStateSize(b *testing.B) {
	for _, scenario := range []string{"chat", "batch"} {
		b.Run(scenario, func(b *testing.B) {
			set := DefaultSettings(scenario)
			keep := make([]*state, min(b.N, 2000)) // bounded: older keys become garbage, still counted
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := range b.N {
				keep[i%len(keep)] = newState(Key{Channel: "c", Model: "m"}, set, t0.UnixNano())
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N), "bytes/key")
			runtime.KeepAlive(keep)
		})
	}
}

// A latency slice's bin saturates instead of wrapping: 70,000 successes in one bin within one
// 2 s slice (35,000 in each of its 1 s count buckets, which do not saturate) leave the window's
// histogram at 65535 in that bin, not at 70000-65536, while all 70,000 are counted.
func TestLatencySliceSaturates(t *testing.T) {
	var w window
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixNano() // an even second: a slice starts here
	w.init(geometry{window: time.Minute, recent: 30 * time.Second, limit: 20 * time.Second}, start)
	if w.lw != 2*int64(time.Second) {
		t.Fatalf("slice width %v, want 2s", time.Duration(w.lw))
	}
	for sec := range 2 {
		if sec == 1 {
			if w.roll() {
				t.Fatal("the slice closed after one second")
			}
		}
		for range 35000 {
			w.add(OutcomeSuccess, 300*time.Millisecond)
		}
	}
	b := w.bin(int64(300 * time.Millisecond))
	if w.lat[b] != math.MaxUint16 || w.latN != math.MaxUint16 {
		t.Errorf("bin %d holds %d (sum %d), want %d", b, w.lat[b], w.latN, math.MaxUint16)
	}
	if got := w.total[OutcomeSuccess]; got != 70000 {
		t.Errorf("successes counted %d, want 70000", got)
	}
}

// The garbage collector scans an object up to its last pointer: every pointer of state must
// come before its window, or each GC cycle walks every key's window (BenchmarkGCWith5000Keys).
func TestStateWindowIsNotScannedByTheGC(t *testing.T) {
	typ := reflect.TypeFor[state]()
	win, _ := typ.FieldByName("win")
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Offset > win.Offset && hasPointers(f.Type) {
			t.Errorf("state.%s (a %s) comes after state.win: the GC would scan the window", f.Name, f.Type)
		}
	}
	// Inside the window, the fields that hold pointers come first.
	plain := ""
	for i := range win.Type.NumField() {
		f := win.Type.Field(i)
		switch {
		case !hasPointers(f.Type):
			plain = f.Name
		case plain != "":
			t.Errorf("window.%s (a %s) holds a pointer after window.%s, which holds none", f.Name, f.Type, plain)
		}
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

func TestEnums(t *testing.T) {
	for o := range numOutcomes {
		got, err := ParseOutcome(o.String())
		if err != nil || got != o {
			t.Errorf("ParseOutcome(%q) = %v, %v", o.String(), got, err)
		}
	}
	if _, err := ParseOutcome("teapot"); err == nil {
		t.Error("ParseOutcome accepted nonsense")
	}
	failures := map[Outcome]bool{OutcomeServerError: true, OutcomeTimeout: true, OutcomeConnectionError: true, OutcomeStreamCut: true, OutcomeMisconfigured: true}
	for o := range numOutcomes {
		if o.IsFailure() != failures[o] {
			t.Errorf("%s.IsFailure() = %v", o, o.IsFailure())
		}
	}
	for status, want := range map[int]Outcome{0: OutcomeConnectionError, 200: OutcomeSuccess, 302: OutcomeServerError, 400: OutcomeClientError,
		401: OutcomeServerError, 403: OutcomeServerError, 404: OutcomeMisconfigured, 405: OutcomeMisconfigured,
		422: OutcomeClientError, 429: OutcomeRateLimited, 500: OutcomeServerError, 503: OutcomeServerError} {
		if got := OutcomeFromStatus(status); got != want {
			t.Errorf("OutcomeFromStatus(%d) = %s, want %s", status, got, want)
		}
	}
	for p := range numPhases {
		got, err := ParsePhase(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePhase(%q) = %v, %v", p.String(), got, err)
		}
	}
	for s := range numStrategies {
		got, err := ParseStrategy(s.String())
		if err != nil || got != s {
			t.Errorf("ParseStrategy(%q) = %v, %v", s.String(), got, err)
		}
	}
	if s, err := ParseStrategy(""); err != nil || s != StrategyHealthScore {
		t.Errorf(`ParseStrategy("") = %v, %v`, s, err)
	}
	b, err := json.Marshal(Status{Phase: PhaseRampingUp})
	if err != nil || !strings.Contains(string(b), `"Phase":"RampingUp"`) {
		t.Errorf("phase JSON: %s, %v", b, err)
	}
}

func TestSettings(t *testing.T) {
	for _, name := range []string{"", "chat", "batch"} {
		if err := DefaultSettings(name).Validate(); err != nil {
			t.Errorf("DefaultSettings(%q) invalid: %v", name, err)
		}
	}
	b := DefaultSettings("batch")
	if b.Window != 5*time.Minute || b.MinRequests != 50 || b.ErrorRatePercent != 12 || b.Cooldown != 10*time.Minute || b.RampHold != 5*time.Minute {
		t.Errorf("batch profile %+v", b)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Settings)
		want   string
	}{
		{"short window", func(s *Settings) { s.Window = 500 * time.Millisecond }, "window must be at least 1s"},
		{"recent longer than window", func(s *Settings) { s.RecentErrorWindow = 2 * time.Minute }, "recentErrorWindow"},
		{"percent above 100", func(s *Settings) { s.ErrorRatePercent = 101 }, "errorRatePercent"},
		{"ejectBelow above degradedBelow", func(s *Settings) { s.EjectBelow = 60 }, "ejectBelow (60)"},
		{"max cooldown below cooldown", func(s *Settings) { s.MaxCooldown = time.Minute }, "maxCooldown"},
		{"ramp not ending at 100", func(s *Settings) { s.RampSteps = []int{5, 50} }, "end at 100"},
		{"ramp not increasing", func(s *Settings) { s.RampSteps = []int{50, 15, 100} }, "strictly increasing"},
		{"no probes", func(s *Settings) { s.ProbeSuccessesRequired = 0 }, "successesRequired"},
		{"zero minRequests", func(s *Settings) { s.MinRequests = 0 }, "minRequests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := chat()
			tc.mutate(&s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// TestConcurrentUse is for the race detector: the proxy calls the engine from many goroutines
// while the admin API reads it and a reload replaces the configuration.
func TestConcurrentUse(t *testing.T) {
	e := newEngine(t, chat(), kA, kB, kC)
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}, {Channel: kB.Channel, Weight: 100}, {Channel: kC.Channel, Weight: 100}}
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			var dst []Route
			for i := range 2000 {
				at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
				e.Observe([]Key{kA, kB, kC}[(i+g)%3], failureEvery(at, i, 3))
				dst = e.Select(at, kA.Model, cands, Strategy(g%3), true, 0.5, dst)
				switch i % 200 {
				case 0:
					e.Tick(at)
					e.Status(at)
					e.ProbesDue(at, nil)
					e.Events(0)
				case 100:
					if g == 0 {
						e.Configure(at, []Target{{Key: kA, Settings: chat()}, {Key: kB, Settings: chat(), Disabled: i%400 == 100}, {Key: kC, Settings: chat()}})
					}
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

// Found in review: with a long window a slice is long too (60 s for a 1 h window), and a busy
// bin saturated while the rare slow bins kept counting, which pushed the p95 up until a healthy
// channel was ejected for latency. Once a bin is full the whole slice stops recording.
func TestSaturationKeepsTheLatencyShape(t *testing.T) {
	set := DefaultSettings("batch")
	set.Window, set.RecentErrorWindow, set.LatencyP95 = time.Hour, time.Minute, 20*time.Second
	if err := set.Validate(); err != nil {
		t.Fatal(err)
	}
	e := NewEngine(0)
	k := Key{Channel: "c", Model: "m"}
	e.Configure(t0, []Target{{Key: k, Settings: set}})
	// 1,000 successes a second for 200 s: 96% take 1 s, 4% take 30 s. The true p95 is 1 s.
	for i := range 200 * 1000 {
		lat := time.Second
		if i%25 == 0 {
			lat = 30 * time.Second
		}
		e.Observe(k, Observation{At: t0.Add(time.Duration(i) * time.Millisecond), Outcome: OutcomeSuccess, Latency: lat})
	}
	e.Tick(t0.Add(200 * time.Second))
	for _, ev := range e.Events(0) {
		t.Errorf("transition on healthy traffic: %s -> %s %s: %s", ev.From, ev.To, ev.Reason, ev.Message)
	}
	st, _ := e.StatusOf(t0.Add(200*time.Second), k)
	if st.P95 > 2*time.Second {
		t.Errorf("p95 %v, want about 1s", st.P95)
	}
}

// The same for the count buckets: once one outcome fills a bucket, the bucket stops counting, so
// the error rate keeps its proportion (here 1%) instead of rising as successes stop counting.
func TestSaturationKeepsTheErrorRate(t *testing.T) {
	var w window
	start := t0.UnixNano()
	w.init(geometry{window: time.Hour, recent: time.Minute, limit: 20 * time.Second}, start)
	if w.w != 12*int64(time.Second) {
		t.Fatalf("bucket width %v, want 12s", time.Duration(w.w))
	}
	for i := range 100000 {
		o := OutcomeSuccess
		if i%100 == 0 {
			o = OutcomeServerError
		}
		w.add(o, time.Second)
	}
	req, fail := w.total.requests(), w.total.failures()
	if rate := float64(fail) / float64(req); rate < 0.009 || rate > 0.011 {
		t.Errorf("error rate %.4f (%d/%d), want 1%%", rate, fail, req)
	}
}

// Replayed logs may carry timestamps near the Unix epoch: the recent window's index must not go
// negative.
func TestWindowNearTheEpoch(t *testing.T) {
	var w window
	w.init(geometry{window: time.Minute, recent: 30 * time.Second, limit: 20 * time.Second}, 0)
	for range 5 {
		w.add(OutcomeServerError, 0)
		w.roll()
	}
	if got := w.total.failures(); got != 5 {
		t.Errorf("failures %d, want 5", got)
	}
}
