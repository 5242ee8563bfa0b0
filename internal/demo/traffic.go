package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// outcome is what one client request saw.
type outcome struct {
	At       time.Time // when it ended
	Model    string
	Stream   bool
	OK       bool
	Kind     string // "ok", "http_503", "stream_incomplete", "stream_error", "transport", ...
	Channel  string // X-Switchyard-Channel of the answer, "" when none
	Attempts int    // X-Switchyard-Attempts, 0 when absent
	Latency  time.Duration
	// RequestID is the proxy's X-Request-Id of the answer ("" without one): a failed request's
	// lines in the proxy's access log.
	RequestID string
}

// generator is a closed-loop client: a fixed number of workers, each sending one request at a
// time, paced to a target rate. When answers are slow (a provider hangs), fewer requests go out,
// as with real clients waiting on their answers.
type generator struct {
	url     string // the proxy's /v1/chat/completions
	models  []string
	weights []float64 // share of requests per model
	rate    float64
	workers int
	client  *http.Client

	mu      sync.Mutex
	results []outcome
}

func newGenerator(apiBase string, models []string, rate float64, workers int) *generator {
	w := make([]float64, len(models))
	for i := range w {
		// The first model takes 60% when there are two, a simple even split otherwise.
		w[i] = 1 / float64(len(models))
	}
	if len(models) == 2 {
		w[0], w[1] = 0.6, 0.4
	}
	tr := &http.Transport{MaxIdleConnsPerHost: workers * 2, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	return &generator{
		url: apiBase + "/v1/chat/completions", models: models, weights: w, rate: rate, workers: workers,
		client: &http.Client{Transport: tr, Timeout: 20 * time.Second},
	}
}

// run sends traffic until ctx ends, then waits for the requests in flight.
func (g *generator) run(ctx context.Context) {
	tokens := make(chan struct{})
	var wg sync.WaitGroup
	for i := range g.workers {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
			for {
				select {
				case <-ctx.Done():
					return
				case <-tokens:
				}
				model := g.pick(rng.Float64())
				stream := rng.IntN(2) == 0
				// Requests in flight finish even when the demo stops: they count.
				g.record(g.send(context.WithoutCancel(ctx), model, stream, rng.IntN(len(prompts))))
			}
		}(uint64(i))
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / g.rate))
	defer t.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-t.C:
			select {
			case tokens <- struct{}{}:
			default: // every worker is busy: this request is not sent (closed loop)
			}
		}
	}
	wg.Wait()
	g.client.CloseIdleConnections()
}

func (g *generator) pick(r float64) string {
	for i, w := range g.weights {
		if r < w {
			return g.models[i]
		}
		r -= w
	}
	return g.models[len(g.models)-1]
}

var prompts = []string{
	"Summarise the incident in one sentence.",
	"Translate 'the provider is down' into French.",
	"Write a haiku about failover.",
	"What is a circuit breaker?",
}

func (g *generator) send(ctx context.Context, model string, stream bool, prompt int) outcome {
	start := time.Now()
	o := outcome{Model: model, Stream: stream}
	body, _ := json.Marshal(map[string]any{
		"model":      model,
		"messages":   []map[string]string{{"role": "user", "content": prompts[prompt]}},
		"stream":     stream,
		"max_tokens": 32,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, bytes.NewReader(body))
	if err != nil {
		o.Kind = "transport"
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer demo-client")
	resp, err := g.client.Do(req)
	if err != nil {
		o.Kind, o.At, o.Latency = "transport", time.Now(), time.Since(start)
		return o
	}
	defer resp.Body.Close()
	o.Channel = resp.Header.Get("X-Switchyard-Channel")
	o.Attempts, _ = strconv.Atoi(resp.Header.Get("X-Switchyard-Attempts"))
	o.RequestID = resp.Header.Get("X-Request-Id")
	switch {
	case resp.StatusCode != http.StatusOK:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		o.Kind = "http_" + strconv.Itoa(resp.StatusCode)
	case stream:
		o.Kind = readStream(resp.Body)
	default:
		var answer struct {
			Choices []json.RawMessage `json:"choices"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&answer); err != nil || len(answer.Choices) == 0 {
			o.Kind = "bad_body"
		} else {
			o.Kind = "ok"
		}
	}
	o.OK = o.Kind == "ok"
	o.At, o.Latency = time.Now(), time.Since(start)
	return o
}

// readStream reads an event stream to its end: complete means "data: [DONE]" arrived and no
// error event before it. A stream that ends otherwise is a client-visible error.
func readStream(r io.Reader) string {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 16<<10), 1<<20)
	sawError, done := false, false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			continue
		}
		var ev struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && len(ev.Error) > 0 && string(ev.Error) != "null" {
			sawError = true
		}
	}
	switch {
	case sawError:
		return "stream_error"
	case sc.Err() != nil || !done:
		return "stream_incomplete"
	}
	return "ok"
}

func (g *generator) record(o outcome) {
	g.mu.Lock()
	g.results = append(g.results, o)
	g.mu.Unlock()
}

// snapshot returns a copy of the results so far.
func (g *generator) snapshot() []outcome {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.results)
}

// clientStats are the generator's own counts for one model (or all, Model "").
type clientStats struct {
	Model      string
	Sent, OK   int
	Errors     int
	ErrorKinds map[string]int
	FailedOver int // answers with X-Switchyard-Attempts > 1
	Streams    int
}

// countClients counts results per model (in models order) and in total (last).
func countClients(results []outcome, models []string) []clientStats {
	idx := map[string]int{}
	out := make([]clientStats, 0, len(models)+1)
	for i, m := range models {
		idx[m] = i
		out = append(out, clientStats{Model: m, ErrorKinds: map[string]int{}})
	}
	total := clientStats{ErrorKinds: map[string]int{}}
	add := func(c *clientStats, o outcome) {
		c.Sent++
		if o.OK {
			c.OK++
		} else {
			c.Errors++
			c.ErrorKinds[o.Kind]++
		}
		if o.Attempts > 1 {
			c.FailedOver++
		}
		if o.Stream {
			c.Streams++
		}
	}
	for _, o := range results {
		if i, ok := idx[o.Model]; ok {
			add(&out[i], o)
		}
		add(&total, o)
	}
	return append(out, total)
}

// rateSince is the number of requests per second that ended in (now-d, now].
func rateSince(results []outcome, now time.Time, d time.Duration) float64 {
	n := 0
	for _, o := range results {
		if o.At.After(now.Add(-d)) && !o.At.After(now) {
			n++
		}
	}
	return float64(n) / d.Seconds()
}

// latencyQuantiles returns the q-quantiles (0-1) of the latencies of results.
func latencyQuantiles(results []outcome, qs ...float64) []time.Duration {
	lat := make([]time.Duration, 0, len(results))
	for _, o := range results {
		lat = append(lat, o.Latency)
	}
	slices.Sort(lat)
	out := make([]time.Duration, len(qs))
	if len(lat) == 0 {
		return out
	}
	for i, q := range qs {
		k := int(q*float64(len(lat))+0.999999) - 1
		out[i] = lat[min(max(k, 0), len(lat)-1)]
	}
	return out
}

func (c clientStats) kinds() string {
	if len(c.ErrorKinds) == 0 {
		return ""
	}
	keys := make([]string, 0, len(c.ErrorKinds))
	for k := range c.ErrorKinds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, c.ErrorKinds[k])
	}
	return strings.Join(parts, ", ")
}
