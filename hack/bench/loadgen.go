package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A small load generator of our own: open loop (requests start on a fixed schedule whatever the
// answers do, so a slow server cannot slow the offered load down) and closed loop (N connections,
// each sending its next request when the last answer is in). Latency is measured from just before
// the request is written to the last byte of the answer. Every run is bounded in count and time.

// target is one way to reach the upstream: direct, through the proxy, through nginx.
type target struct {
	name   string
	url    string
	body   []byte
	header http.Header
	client *http.Client
	stream bool // read the answer as an event stream: TTFT and time to [DONE]
	events int  // stream: record the arrival of each of the first events data: events (0: none)
	expect int  // the status that counts as the expected answer (0: 200)
}

// sample is one request's outcome.
type sample struct {
	lat    time.Duration // to the last byte (stream: to data: [DONE])
	ttft   time.Duration // stream: to the first data: event
	events []eventTime   // stream, with target.events: each data: event before [DONE], in order
	err    error
}

// eventTime is when one stream event reached the client.
type eventTime struct {
	at      time.Duration // since the request started (events[0].at is the TTFT)
	transit time.Duration // from the upstream's write (the stamp in its id) to this read; -1: no stamp
}

const requestTimeout = 10 * time.Second

func newClient(maxConns int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        maxConns * 2,
		MaxIdleConnsPerHost: maxConns,
		MaxConnsPerHost:     maxConns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: requestTimeout}
}

// do sends one request and reads the whole answer.
func (t *target) do(ctx context.Context, extra http.Header) sample {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return sample{err: err}
	}
	for k, v := range t.header {
		req.Header[k] = v
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return sample{err: err}
	}
	defer resp.Body.Close()
	want := t.expect
	if want == 0 {
		want = http.StatusOK
	}
	if resp.StatusCode != want {
		_, _ = io.Copy(io.Discard, resp.Body)
		return sample{lat: time.Since(start), err: fmt.Errorf("%s: HTTP %d", t.name, resp.StatusCode)}
	}
	if !t.stream {
		_, err = io.Copy(io.Discard, resp.Body)
		return sample{lat: time.Since(start), err: err}
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	var s sample
	events := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if s.err == nil {
				s.err = fmt.Errorf("%s: stream ended without [DONE] after %d events: %v", t.name, events, err)
			}
			return s
		}
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		now := time.Now()
		if events == 0 {
			s.ttft = now.Sub(start)
		}
		events++
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			s.lat = time.Since(start)
			_, _ = io.Copy(io.Discard, resp.Body)
			return s
		}
		if len(s.events) < t.events {
			if s.events == nil {
				s.events = make([]eventTime, 0, t.events) // bounded: t.events per stream
			}
			e := eventTime{at: now.Sub(start), transit: -1}
			if stamp, ok := eventStamp(line); ok && now.UnixNano() >= stamp {
				e.transit = time.Duration(now.UnixNano() - stamp)
			}
			s.events = append(s.events, e)
		}
	}
}

// eventStamp is the Unix time in ns the mock upstream put in an event's id when it wrote it
// (wall clocks: the upstream is another process on the same machine).
func eventStamp(line []byte) (int64, bool) {
	i := bytes.Index(line, []byte(stampID))
	if i < 0 {
		return 0, false
	}
	var n int64
	digits := 0
	for _, c := range line[i+len(stampID):] {
		if c < '0' || c > '9' || digits == 19 {
			break
		}
		n = n*10 + int64(c-'0')
		digits++
	}
	return n, digits > 0
}

// runResult is what one open- or closed-loop run produced.
type runResult struct {
	samples  []sample
	sent     int
	errors   int
	firstErr error
	elapsed  time.Duration
	skipped  int // open loop: starts dropped because maxInFlight requests were still open
}

func (r *runResult) add(o runResult) {
	r.samples = append(r.samples, o.samples...)
	r.sent += o.sent
	r.errors += o.errors
	r.skipped += o.skipped
	r.elapsed += o.elapsed
	if r.firstErr == nil {
		r.firstErr = o.firstErr
	}
}

const maxInFlight = 2048

// openLoop starts rate requests per second for d, on schedule: when the generator wakes late it
// starts the requests that were due at once. It waits for the last answer before returning.
func openLoop(ctx context.Context, t *target, rate int, d time.Duration, extra http.Header) runResult {
	return openLoopUntil(ctx, nil, t, rate, d, extra)
}

// openLoopUntil is openLoop that also stops starting requests when stop is closed; the requests
// already started finish (ctx still bounds them).
func openLoopUntil(ctx context.Context, stop <-chan struct{}, t *target, rate int, d time.Duration, extra http.Header) runResult {
	n := int(float64(rate) * d.Seconds())
	if n < 1 {
		n = 1
	}
	interval := time.Second / time.Duration(rate)
	out := make([]sample, n)
	var inFlight atomic.Int64
	var wg sync.WaitGroup
	res := runResult{}
	start := time.Now()
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			case <-stop:
			}
		}
		if ctx.Err() != nil || stopped(stop) {
			n = i
			break
		}
		if inFlight.Load() >= maxInFlight {
			out[i].err = errors.New("skipped: too many requests in flight")
			res.skipped++
			continue
		}
		inFlight.Add(1)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer inFlight.Add(-1)
			out[i] = t.do(ctx, extra)
		}(i)
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.sent = n - res.skipped
	for _, s := range out[:n] {
		if s.err != nil {
			if res.firstErr == nil {
				res.firstErr = s.err
			}
			res.errors++
			continue
		}
		res.samples = append(res.samples, s)
	}
	return res
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// closedLoop runs conns workers, each sending its next request as soon as the last answer is in,
// for d. Latencies of the first maxKeep answers per worker are kept.
func closedLoop(ctx context.Context, t *target, conns int, d time.Duration) runResult {
	const maxKeep = 100000
	ctx, cancel := context.WithTimeout(ctx, d+requestTimeout)
	defer cancel()
	deadline := time.Now().Add(d)
	per := make([]runResult, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := &per[w]
			for time.Now().Before(deadline) && ctx.Err() == nil {
				s := t.do(ctx, nil)
				r.sent++
				if s.err != nil {
					r.errors++
					if r.firstErr == nil {
						r.firstErr = s.err
					}
					continue
				}
				if len(r.samples) < maxKeep {
					r.samples = append(r.samples, s)
				}
			}
		}(w)
	}
	wg.Wait()
	res := runResult{elapsed: time.Since(start)}
	for _, r := range per {
		e := res.elapsed
		res.add(r)
		res.elapsed = e
	}
	return res
}

// ---- statistics ----

// dist is a sorted set of durations.
type dist []time.Duration

func newDist(samples []sample, ttft bool) dist {
	d := make(dist, 0, len(samples))
	for _, s := range samples {
		if ttft {
			d = append(d, s.ttft)
		} else {
			d = append(d, s.lat)
		}
	}
	slices.Sort(d)
	return d
}

// q is the nearest-rank quantile (0 < p <= 1); 0 for an empty set.
func (d dist) q(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*p+0.9999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func (d dist) median() time.Duration { return d.q(0.5) }

// ---- stream events ----

// eventMedians is, for each event index i, the median (nearest rank) over the streams of the
// time event i reached the client since its request started. A stream with fewer events counts
// for the indices it has; the result is as long as the longest stream's record.
func eventMedians(samples []sample) []time.Duration {
	n := 0
	for _, s := range samples {
		n = max(n, len(s.events))
	}
	out := make([]time.Duration, n)
	col := make(dist, 0, len(samples))
	for i := range n {
		col = col[:0]
		for _, s := range samples {
			if i < len(s.events) {
				col = append(col, s.events[i].at)
			}
		}
		slices.Sort(col)
		out[i] = col.median()
	}
	return out
}

// eventAdded is, per event index, via's median arrival minus direct's, in µs, for the indices both
// have: how much later event i reaches the client through the proxy.
func eventAdded(direct, via []time.Duration) []float64 {
	out := make([]float64, min(len(direct), len(via)))
	for i := range out {
		out[i] = usf(via[i] - direct[i])
	}
	return out
}

// lateness pools, over the streams, the events after the first: each one's arrival since the
// request started less its place in the upstream's schedule (i × gap). Spread in it is the
// event's own delay, not the schedule's.
func lateness(samples []sample, gap time.Duration) dist {
	var d dist
	for _, s := range samples {
		for i := 1; i < len(s.events); i++ {
			d = append(d, s.events[i].at-time.Duration(i)*gap)
		}
	}
	slices.Sort(d)
	return d
}

// transits pools the transit times (upstream write to client read) of the events after the
// first that carried a stamp.
func transits(samples []sample) dist {
	var d dist
	for _, s := range samples {
		for i := 1; i < len(s.events); i++ {
			if t := s.events[i].transit; t >= 0 {
				d = append(d, t)
			}
		}
	}
	slices.Sort(d)
	return d
}

// streamStarts pools, over the streams whose first event carried a stamp, the time from the
// request's start to the upstream's write of that event: arrival less transit.
func streamStarts(samples []sample) dist {
	var d dist
	for _, s := range samples {
		if len(s.events) > 0 && s.events[0].transit >= 0 {
			d = append(d, s.events[0].at-s.events[0].transit)
		}
	}
	slices.Sort(d)
	return d
}

// medianF is the median of xs (the mean of the middle two for an even count); 0 for none. It
// sorts xs.
func medianF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return round1((xs[n/2-1] + xs[n/2]) / 2)
	}
	return xs[len(xs)/2]
}
