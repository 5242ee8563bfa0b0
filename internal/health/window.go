package health

import (
	"math"
	"sync"
	"time"
)

const (
	// maxSlots count buckets cover one window: 1 s resolution for windows up to 5 min (both
	// profiles); a longer window gets ceil(Window/300) whole seconds per bucket.
	maxSlots = 300
	// maxSlices latency slices cover one window. A 240-byte histogram per second would cost 72 KiB
	// for a 5 min window, so latency is kept at Window/32 (2 s for chat, 10 s for batch): with
	// 16-bit bins, about 4 KiB per key. With thousands of keys this ring is most of the proxy's
	// memory.
	maxSlices = 32
	// nBins log-spaced latency bins, three per doubling (each bin ~26% wide). Bins are
	// upper-inclusive, and the edge at index limitBin is exactly LatencyP95, so
	// "p95 > LatencyP95" is decided exactly, not to within a bin.
	nBins    = 60
	limitBin = 44
	// minP95Samples: fewer samples have no 95th percentile distinct from their maximum.
	minP95Samples = 20
)

// counts are one bucket's tallies by outcome; client errors are never counted. uint16 keeps the
// ring small; a bucket saturates at 65535 per outcome per second instead of wrapping.
type counts [OutcomeClientError]uint16

// tally is a sum of buckets.
type tally [OutcomeClientError]uint32

func (t *tally) requests() int {
	n := 0
	for _, c := range t {
		n += int(c)
	}
	return n
}

func (t *tally) failures() int {
	return int(t[OutcomeServerError] + t[OutcomeTimeout] + t[OutcomeConnectionError] + t[OutcomeStreamCut])
}

type hist [nBins]uint32

// sliceHist is one latency slice's histogram. uint16, like the count buckets, halves the ring; a
// slice whose bin reaches 65535 stops recording (sliceFull) instead of wrapping or skewing. The
// window's sums stay uint32.
type sliceHist [nBins]uint16

// window is a bounded-memory, time-bucketed sliding window. Buckets are aligned to absolute
// multiples of their width. At time t the window holds the bucket of t plus the nSlots before
// it, i.e. [floor(t)-Window, t] for 1 s buckets: a superset of (t-Window, t], so an observation
// leaves the window between Window and Window+1s after it happened. Running totals are kept
// so that every rule is O(1) on the hot path.
type window struct {
	// slots are the count buckets, nSlots+1 of them: sized to the window (61 for chat's 60 s,
	// 301 for batch's 5 min). slots and edges are window's only pointers and its first fields,
	// so the garbage collector's scan of a key's state ends here (see state).
	slots []counts
	// edges are the latency bins' upper edges, shared by every key with the same LatencyP95.
	edges *[nBins - 1]int64

	w, lw                   int64 // count bucket and latency slice widths (ns); lw is a multiple of w
	nSlots, nRecent, nSlice int64 // buckets behind the current one: window, recent window, latency
	head, lhead             int64 // absolute index of the current count bucket and latency slice

	total, recent tally
	lat           hist   // latency of successes over the window's slices
	latN          uint32 // sum of lat
	// bucketFull and sliceFull: an outcome of the current bucket, or a bin of the current latency
	// slice, reached 65535. From then on nothing more is recorded in it, whatever the outcome or
	// bin: what was recorded keeps the proportions of the traffic (an error rate must not rise
	// because successes stopped counting first, nor a p95 because the busiest bin did).
	bucketFull, sliceFull bool

	slices [maxSlices + 1]sliceHist
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// geometry is what decides the window's layout; a reload that changes it restarts the window.
type geometry struct{ window, recent, limit time.Duration }

func geometryOf(s *Settings) geometry {
	return geometry{s.Window, s.RecentErrorWindow, s.LatencyP95}
}

func (w *window) init(g geometry, t int64) {
	*w = window{}
	sec := int64(time.Second)
	win := int64(g.window)
	w.w = max(sec, ceilDiv(ceilDiv(win, maxSlots), sec)*sec)
	w.nSlots = ceilDiv(win, w.w)
	w.nRecent = min(w.nSlots, ceilDiv(int64(g.recent), w.w))
	w.lw = max(w.w, ceilDiv(ceilDiv(win, maxSlices), w.w)*w.w)
	w.nSlice = ceilDiv(win, w.lw)
	w.slots = make([]counts, w.nSlots+1)
	ref := float64(g.limit)
	if ref <= 0 {
		ref = float64(10 * time.Second) // no p95 rule: any scale will do for the score
	}
	w.edges = edgesFor(ref)
	w.jump(t)
}

// edgeTables holds one table of bin edges per latency limit, shared by the keys that use it (472
// bytes a key otherwise). Tables are immutable once stored; there is one per distinct LatencyP95
// a process has seen.
var edgeTables sync.Map // int64 (ns) -> *[nBins - 1]int64

func edgesFor(ref float64) *[nBins - 1]int64 {
	if e, ok := edgeTables.Load(int64(ref)); ok {
		return e.(*[nBins - 1]int64)
	}
	e := new([nBins - 1]int64)
	for i := range e {
		e[i] = int64(math.Round(ref * math.Exp2(float64(i-limitBin)/3)))
	}
	e[limitBin] = int64(ref)
	actual, _ := edgeTables.LoadOrStore(int64(ref), e)
	return actual.(*[nBins - 1]int64)
}

// jump moves an empty window to t without walking the buckets in between.
func (w *window) jump(t int64) {
	w.head, w.lhead = t/w.w, t/w.lw
	w.bucketFull, w.sliceFull = false, false
}

func (w *window) empty() bool { return w.total.requests() == 0 && w.latN == 0 }

// bin returns the upper-inclusive bin of d; the last bin takes everything above the last edge.
func (w *window) bin(d int64) int {
	lo, hi := 0, nBins-1
	for lo < hi {
		m := (lo + hi) / 2
		if d <= w.edges[m] {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// add records an outcome in the current bucket and, for a success with a known latency, in the
// current latency slice. It reports whether the latency histogram changed.
func (w *window) add(o Outcome, latency time.Duration) bool {
	if w.bucketFull {
		return false
	}
	c := &w.slots[w.head%(w.nSlots+1)]
	if c[o] == math.MaxUint16 {
		w.bucketFull = true
		return false
	}
	c[o]++
	w.total[o]++
	w.recent[o]++
	if o != OutcomeSuccess || latency <= 0 {
		return false
	}
	if w.sliceFull {
		return false
	}
	b := w.bin(int64(latency))
	sl := &w.slices[w.lhead%(w.nSlice+1)]
	if sl[b] == math.MaxUint16 {
		w.sliceFull = true
		return false
	}
	sl[b]++
	w.lat[b]++
	w.latN++
	return true
}

// roll advances the window by one count bucket: the bucket leaving the recent window and the one
// leaving the window are subtracted from the totals. It reports whether a latency slice closed too.
func (w *window) roll() bool {
	idx := w.head + 1
	n := w.nSlots + 1
	// The bucket leaving the recent window; idx can be smaller than nRecent+1 for timestamps
	// near the Unix epoch (replayed logs), hence the non-negative modulo.
	for o, c := range w.slots[((idx-w.nRecent-1)%n+n)%n] {
		w.recent[o] -= uint32(c)
	}
	reuse := &w.slots[idx%n]
	for o, c := range reuse {
		w.total[o] -= uint32(c)
	}
	*reuse = counts{}
	w.head = idx
	w.bucketFull = false
	if b := idx * w.w; b%w.lw == 0 {
		w.lhead = b / w.lw
		sl := &w.slices[w.lhead%(w.nSlice+1)]
		for i, c := range sl {
			w.lat[i] -= uint32(c)
			w.latN -= uint32(c)
		}
		*sl = sliceHist{}
		w.sliceFull = false
		return true
	}
	return false
}

// quantile estimates the pct-th percentile of h (n samples) in ns, interpolating linearly inside
// the bin that holds rank ceil(pct*n/100). It never leaves that bin, so comparisons against edges
// are exact; the rank is integer arithmetic so that 95% of 40 is exactly 38.
func (w *window) quantile(h *hist, n uint32, pct uint64) float64 {
	if n == 0 {
		return 0
	}
	rank := uint32((uint64(n)*pct + 99) / 100)
	var cum uint32
	for i, c := range h {
		if c == 0 || cum+c < rank {
			cum += c
			continue
		}
		lo := 0.0
		if i > 0 {
			lo = float64(w.edges[i-1])
		}
		if i == nBins-1 {
			return lo // beyond the last edge: report the edge
		}
		hi := float64(w.edges[i])
		return lo + (hi-lo)*float64(rank-cum)/float64(c)
	}
	return 0
}
