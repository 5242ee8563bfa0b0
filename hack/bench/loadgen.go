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
	expect int  // the status that counts as the expected answer (0: 200)
}

// sample is one request's outcome.
type sample struct {
	lat  time.Duration // to the last byte (stream: to data: [DONE])
	ttft time.Duration // stream: to the first data: event
	err  error
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
		if events == 0 {
			s.ttft = time.Since(start)
		}
		events++
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			s.lat = time.Since(start)
			_, _ = io.Copy(io.Discard, resp.Body)
			return s
		}
	}
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
