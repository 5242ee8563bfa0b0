package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/routing/routingtest"
)

// BenchmarkHotPath measures route + forward through the proxy's handler against an in-process
// upstream that answers a fixed small JSON body: the proxy's own cost per request, plus one
// loopback round trip (compare BenchmarkDirect for the upstream alone).
func BenchmarkHotPath(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(fixedAnswer))
	defer up.Close()
	dir := b.TempDir()
	cfg := rigConfig{}.render(up.URL, up.URL)
	if err := writeFileErr(dir, cfg); err != nil {
		b.Fatal(err)
	}
	t, _, err := source.LoadFiles(dir, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Apply(t, dir)
	front := httptest.NewServer(s.Handler())
	defer front.Close()
	benchPost(b, front.URL+"/v1/chat/completions")
}

// BenchmarkDirect is the same client against the upstream alone: the baseline for BenchmarkHotPath.
func BenchmarkDirect(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(fixedAnswer))
	defer up.Close()
	benchPost(b, up.URL+"/v1/chat/completions")
}

const benchBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`

func benchPost(b *testing.B, url string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := client.Post(url, "application/json", strings.NewReader(benchBody))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

func fixedAnswer(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
}

// piiBenchPrompt is a chat body whose user message is about kb KiB of prose with an e-mail
// address every 512 bytes.
func piiBenchPrompt(kb int) []byte {
	var text strings.Builder
	for text.Len() < kb<<10 {
		text.WriteString("Please forward the quarterly figures to the finance team and copy ann.lee@example.com on the thread; ")
		for text.Len()%512 > 100 {
			text.WriteString("the numbers for the northern region are still pending review by the controller. ")
		}
	}
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{
		map[string]any{"role": "system", "content": "You are a helpful assistant."},
		map[string]any{"role": "user", "content": text.String()},
	}})
	return b
}

// BenchmarkHotPathPII: the whole request path (route, forward, answer) with the policy's PII
// masking off and in Mask mode (e-mail detector, restore on), on the same request, per prompt
// size. ns/KB is the time per KiB of request body.
func BenchmarkHotPathPII(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(fixedAnswer))
	defer up.Close()
	for _, kb := range []int{1, 16, 64} {
		body := piiBenchPrompt(kb)
		for _, mode := range []string{"off", "mask"} {
			b.Run(fmt.Sprintf("prompt=%dKB/pii=%s", kb, mode), func(b *testing.B) {
				policy := ""
				if mode == "mask" {
					policy = "pii: {mode: Mask, detectors: [email]}"
				}
				dir := b.TempDir()
				if err := writeFileErr(dir, rigConfig{policy: policy}.render(up.URL, up.URL)); err != nil {
					b.Fatal(err)
				}
				t, _, err := source.LoadFiles(dir, func(string) string { return "" })
				if err != nil {
					b.Fatal(err)
				}
				s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				s.Apply(t, dir)
				front := httptest.NewServer(s.Handler())
				defer front.Close()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					resp, err := client.Post(front.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(body))*1024, "ns/KB")
			})
		}
	}
}

// BenchmarkStep is one round of the proxy's background work (Server.Step, every 250 ms: the
// engine's Tick and ProbesDue, the health gauges, the journal) with a few channels (one team of
// routingtest, 25 channel×models) and at the benchmarked scale (200 teams, 5,000), with 250
// requests to one model between rounds (1,000 req/s). An op is a round with its 250 requests;
// step-ns is Step's own time. Before the sweeps skipped the keys at rest, a round at scale walked
// every key three times (docs/benchmarks.md, "Tail latency at scale").
func BenchmarkStep(b *testing.B) {
	for _, teams := range []int{1, routingtest.ScaleTeams} {
		b.Run(fmt.Sprintf("keys=%d", teams*routingtest.ScaleGroup*routingtest.ScaleModels), func(b *testing.B) {
			tbl, problems := routing.Compile(routingtest.Teams("llm", teams))
			if len(routing.Blocking(problems)) > 0 {
				b.Fatal(problems)
			}
			clk := &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
			s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clk})
			s.Apply(tbl, "routingtest")
			mr := s.cfg.Load().models[fmt.Sprintf("team-%03d-gpt-4o-2024-08-06", teams/2)]
			var routes []health.Route
			i := 0
			var step time.Duration
			b.ReportAllocs()
			for b.Loop() {
				for range 250 {
					clk.Advance(time.Millisecond)
					now := clk.Now()
					routes = s.engine.Select(now, mr.Name, mr.Candidates, mr.Strategy, true, float64(i%1000)/1000, routes)
					s.engine.Observe(health.Key{Channel: routes[0].Channel, Model: mr.Name},
						health.Observation{At: now, Outcome: health.OutcomeSuccess, Latency: time.Duration(200+i%800) * time.Millisecond})
					i++
				}
				start := time.Now()
				s.Step(context.Background())
				step += time.Since(start)
			}
			b.ReportMetric(float64(step.Nanoseconds())/float64(b.N), "step-ns")
		})
	}
}

// BenchmarkGCAtScale is one full garbage collection of a proxy with the benchmarked scale
// applied (1,000 channels × 5 models, 5,000 keys, every key's health gauges published), with
// the heap's live objects: what marking costs in every GC cycle, which runs concurrently with
// the requests (BenchmarkGCWith5000Keys in internal/health is the engine's share of it).
func BenchmarkGCAtScale(b *testing.B) {
	tbl, problems := routing.Compile(routingtest.ScaleInputs("llm"))
	if len(routing.Blocking(problems)) > 0 {
		b.Fatal(problems)
	}
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Apply(tbl, "routingtest")
	s.Step(context.Background())
	tbl = nil
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	for b.Loop() {
		runtime.GC()
	}
	b.ReportMetric(float64(ms.HeapObjects), "heap-objects")
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
	runtime.KeepAlive(s)
}

// BenchmarkScrapeAtScale is one Gather of the registry (what /metrics serves) with 5,000 keys.
func BenchmarkScrapeAtScale(b *testing.B) {
	tbl, problems := routing.Compile(routingtest.ScaleInputs("llm"))
	if len(routing.Blocking(problems)) > 0 {
		b.Fatal(problems)
	}
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Apply(tbl, "routingtest")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Registry().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
