package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// load sends n requests from workers goroutines and returns the statuses that were not 200.
func (r *rig) load(n, workers int, stream bool) (failures []string) {
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				got := r.post("/v1/chat/completions", chat("gpt-4o", stream))
				bad := got.err != nil || got.status != 200 || (stream && !strings.Contains(got.body, "[DONE]"))
				if bad {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d %v %.200s", got.status, got.err, got.body))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return failures
}

func TestFailoverUnderLoadZeroClientErrors(t *testing.T) {
	r := newRig(t, rigConfig{policy: "strategy: Weighted"})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	if f := r.load(300, 8, false); len(f) > 0 {
		t.Fatalf("%d client-visible errors while one of two channels is down, first: %s", len(f), f[0])
	}
	if f := r.load(60, 4, true); len(f) > 0 {
		t.Fatalf("%d client-visible stream errors, first: %s", len(f), f[0])
	}
	if p := r.phase("chan-a", "gpt-4o"); p != "Ejected" {
		t.Errorf("channel A phase = %s, want Ejected", p)
	}
	// Ejected after 5 consecutive failures (chat): A must not keep taking traffic. With 8
	// concurrent workers a few more may be in flight when the verdict lands.
	if a := r.A.Requests("gpt-4o"); a > 5+8 {
		t.Errorf("A saw %d requests after being ejected", a)
	}
	// Model isolation: gpt-4o-mini on the same channel is untouched.
	if p := r.phase("chan-a", "gpt-4o-mini"); p != "Healthy" {
		t.Errorf("gpt-4o-mini on A = %s, want Healthy", p)
	}
}

// TestEjectProbeRampOnAdminAPI walks a channel through the whole recovery, moving the health clock.
func TestEjectProbeRampOnAdminAPI(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500})
	for i := 0; i < 6; i++ {
		if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 {
			t.Fatalf("request %d: %d %s", i, got.status, got.body)
		}
	}
	c := r.channel("chan-a", "gpt-4o")
	if c["phase"] != "Ejected" || c["trafficPercent"].(float64) != 0 || c["cooldownUntil"] == nil {
		t.Fatalf("after 5 failures: %v", c)
	}
	lt := c["lastTransition"].(map[string]any)
	if lt["reason"] != "ConsecutiveFailures" || !strings.Contains(lt["message"].(string), "5 consecutive failures") {
		t.Errorf("lastTransition = %v", lt)
	}
	// Provider recovers; nothing happens until the cooldown (chat: 5m) is over.
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{})
	before := r.A.Requests("gpt-4o")
	r.step(4 * time.Minute)
	if p := r.phase("chan-a", "gpt-4o"); p != "Ejected" || r.A.Requests("gpt-4o") != before {
		t.Fatalf("during cooldown: phase %s, probes %d", p, r.A.Requests("gpt-4o")-before)
	}
	r.step(61 * time.Second)
	// Probing: one probe per interval (10s), three successes needed.
	for i := 0; i < 3; i++ {
		if i > 0 {
			r.step(10 * time.Second)
		}
		if p := r.phase("chan-a", "gpt-4o"); i < 2 && p != "Probing" {
			t.Fatalf("probe %d: phase %s", i, p)
		}
	}
	if probes := r.A.Requests("gpt-4o") - before; probes != 3 {
		t.Errorf("probes sent = %d, want 3", probes)
	}
	if !strings.Contains(r.accessLog.String(), `"probe":true`) {
		t.Error("probes are missing from the access log")
	}
	r.step(time.Second)
	shares := []float64{}
	for i := 0; i < 4; i++ {
		c := r.channel("chan-a", "gpt-4o")
		shares = append(shares, c["trafficPercent"].(float64))
		if i < 3 && c["phase"] != "RampingUp" {
			t.Fatalf("ramp step %d: phase %v", i, c["phase"])
		}
		r.step(3 * time.Minute)
	}
	if fmt.Sprint(shares) != "[5 15 50 100]" {
		t.Errorf("ramp shares = %v, want [5 15 50 100]", shares)
	}
	if p := r.phase("chan-a", "gpt-4o"); p != "Healthy" {
		t.Errorf("after the ramp: %s", p)
	}
	// The journal tells the story, newest last.
	resp, err := http.Get(r.admin.URL + "/admin/v1/events?since=0")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Compact JSON, as the admin API answers by default.
	for _, want := range []string{`"to":"Ejected"`, `"to":"Probing"`, `"to":"RampingUp"`, `"to":"Healthy"`, `"actor":"probe"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("journal lacks %s:\n%s", want, b)
		}
	}
}

func TestReloadUnderLoadZeroFailedRequests(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.A.SetDefault(mockprovider.Behavior{Latency: 20 * time.Millisecond})
	done := make(chan []string)
	go func() { done <- r.load(200, 6, false) }()
	for i := 0; i < 10; i++ {
		w := 100 + i
		r.write(rigConfig{channelA: fmt.Sprintf("weight: %d", w)})
		if err := r.src.Load(r.srv); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A broken config in the middle: refused, the last good one keeps serving.
	writeFile(t, r.dir, "apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: x}\nspec: {models: [m], channels: [{name: missing}]}\n")
	if err := r.src.Load(r.srv); err == nil {
		t.Fatal("a config with a missing channel was accepted")
	}
	if f := <-done; len(f) > 0 {
		t.Fatalf("%d failed requests during reloads, first: %s", len(f), f[0])
	}
	state := r.srv.ChannelsState()
	if state.Config.Error == "" || !strings.Contains(state.Config.Error, "missing") || state.Config.Hash == "" {
		t.Errorf("admin config state = %+v", state.Config)
	}
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 {
		t.Errorf("after a rejected config: %d", got.status)
	}
}

func TestClientErrorsNeverReachAProvider(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.srv.opts.MaxBodyBytes = 1024
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"invalid JSON", "POST", "/v1/chat/completions", `{"model":`, 400, "invalid_request"},
		{"not an object", "POST", "/v1/chat/completions", `["gpt-4o"]`, 400, "invalid_request"},
		{"missing model", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "invalid_request"},
		{"model not a string", "POST", "/v1/chat/completions", `{"model":4}`, 400, "invalid_request"},
		{"stream not a boolean", "POST", "/v1/chat/completions", `{"model":"gpt-4o","stream":"yes"}`, 400, "invalid_request"},
		{"empty body", "POST", "/v1/embeddings", ``, 400, "invalid_request"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-5"}`, 404, "model_not_found"},
		{"body over the limit", "POST", "/v1/chat/completions", `{"model":"gpt-4o","input":"` + strings.Repeat("x", 2048) + `"}`, 413, "request_too_large"},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405, "method_not_allowed"},
		{"wrong method on models", "POST", "/v1/models", `{}`, 405, "method_not_allowed"},
		{"unknown path", "POST", "/v1/images/generations", `{"model":"gpt-4o"}`, 404, "unknown_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, r.api.URL+tt.path, strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if !strings.Contains(string(b), `"code":"`+tt.code+`"`) || !strings.Contains(string(b), `"error":{"message":`) {
				t.Errorf("not an OpenAI error with code %s: %s", tt.code, b)
			}
			if resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("content type %q", resp.Header.Get("Content-Type"))
			}
		})
	}
	if n := r.A.Total() + r.B.Total(); n != 0 {
		t.Errorf("client errors reached the providers %d times", n)
	}
}

func TestNoChannelAnswers503AndAllRateLimited429(t *testing.T) {
	r := newRig(t, rigConfig{policy: "panicRouting: false"})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 502, Message: "bad gateway upstream"})
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503, Message: "overloaded upstream"})
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 503 || !strings.Contains(got.body, "no_channel_available") || !strings.Contains(got.body, "overloaded upstream") {
		t.Errorf("all down: %d %s", got.status, got.body)
	}

	r2 := newRig(t, rigConfig{})
	r2.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 20})
	r2.B.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 30})
	got = r2.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 429 || got.header.Get("Retry-After") != "20" || !strings.Contains(got.body, "rate_limit_exceeded") {
		t.Errorf("all rate limited: %d Retry-After=%q %s", got.status, got.header.Get("Retry-After"), got.body)
	}
	// While both honour their Retry-After, the proxy answers 429 without calling them.
	before := r2.A.Total() + r2.B.Total()
	got = r2.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 429 || got.header.Get("Retry-After") == "" || r2.A.Total()+r2.B.Total() != before {
		t.Errorf("during Retry-After: %d %q, upstream calls %d", got.status, got.header.Get("Retry-After"), r2.A.Total()+r2.B.Total()-before)
	}
	if p := r2.phase("chan-a", "gpt-4o"); p != "RateLimited" {
		t.Errorf("429s: phase %s, want RateLimited", p)
	}
}

func TestKeysNeverLeakAndClientAuthNotForwarded(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500})
	got := r.post("/v1/chat/completions", chat("gpt-4o", false), "Authorization", "Bearer client-own-token", "Cookie", "session=1")
	if got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	h := r.B.LastHeaders()
	if h.Get("Api-Key") != keyB || h.Get("Authorization") != "" || h.Get("Cookie") != "" {
		t.Errorf("azure channel got Api-Key=%q Authorization=%q Cookie=%q", h.Get("Api-Key"), h.Get("Authorization"), h.Get("Cookie"))
	}
	if ha := r.A.LastHeaders(); ha.Get("Authorization") != "Bearer "+keyA {
		t.Errorf("openai channel got Authorization=%q", ha.Get("Authorization"))
	}
	r.post("/v1/chat/completions", `{"bad json`)
	resp, _ := http.Get(r.admin.URL + "/admin/v1/channels")
	adminBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp, _ = http.Get(r.admin.URL + "/metrics")
	metricsBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	everything := r.logs.String() + r.accessLog.String() + string(adminBody) + string(metricsBody) + got.body + fmt.Sprint(got.header)
	for _, k := range []string{keyA, keyB, "client-own-token"} {
		if strings.Contains(everything, k) {
			t.Errorf("%q leaked into logs, admin API, metrics or the response", k)
		}
	}
	if !strings.Contains(r.logs.String(), "Loaded routing config") {
		t.Error("the test captured no logs; it would not notice a leak")
	}
}

func TestDisabledChannelGetsNoTraffic(t *testing.T) {
	r := newRig(t, rigConfig{channelA: "disabled: true\ndisabledReason: INC-7 provider incident"})
	if f := r.load(20, 2, false); len(f) > 0 {
		t.Fatal(f[0])
	}
	if r.A.Total() != 0 {
		t.Errorf("a disabled channel got %d requests", r.A.Total())
	}
	c := r.channel("chan-a", "gpt-4o")
	if c["phase"] != "Disabled" || !strings.Contains(c["lastTransition"].(map[string]any)["message"].(string), "INC-7") {
		t.Errorf("admin: %v", c)
	}
	// Lifting the override re-enters through probes, not at 100%.
	r.write(rigConfig{})
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	if p := r.phase("chan-a", "gpt-4o"); p != "Probing" {
		t.Errorf("after enabling: %s, want Probing", p)
	}
}

func TestFaultInjectionDrill(t *testing.T) {
	r := newRig(t, rigConfig{channelA: "faultInjection: {abortStatus: 503, percent: 100}"})
	if f := r.load(10, 1, false); len(f) > 0 {
		t.Fatal(f[0])
	}
	if r.A.Total() != 0 || r.B.Requests("gpt-4o") != 10 {
		t.Errorf("drill: A saw %d (want 0: aborted before upstream), B saw %d", r.A.Total(), r.B.Requests("gpt-4o"))
	}
	if p := r.phase("chan-a", "gpt-4o"); p != "Ejected" {
		t.Errorf("a drill is observed like a real fault: phase %s", p)
	}
	if !strings.Contains(r.accessLog.String(), "injected by faultInjection") {
		t.Error("the access log does not say the fault was injected")
	}

	// onlyMarked: unmarked traffic is untouched, marked traffic gets the fault.
	m := newRig(t, rigConfig{channelA: "faultInjection: {abortStatus: 500, onlyMarked: true}"})
	m.post("/v1/chat/completions", chat("gpt-4o", false))
	if m.A.Requests("gpt-4o") != 1 {
		t.Errorf("unmarked request did not reach A")
	}
	got := m.post("/v1/chat/completions", chat("gpt-4o", false), "X-Switchyard-Drill", "true")
	if got.header.Get("X-Switchyard-Channel") != "chan-b" || m.A.Requests("gpt-4o") != 1 {
		t.Errorf("marked request: channel %s, A saw %d", got.header.Get("X-Switchyard-Channel"), m.A.Requests("gpt-4o"))
	}

	// A drill past its end time does nothing.
	e := newRig(t, rigConfig{channelA: `faultInjection: {abortStatus: 500, until: "2026-11-30T09:00:00Z"}`})
	if got := e.post("/v1/chat/completions", chat("gpt-4o", false)); got.header.Get("X-Switchyard-Channel") != "chan-a" {
		t.Errorf("expired drill still active: answered by %s", got.header.Get("X-Switchyard-Channel"))
	}
}

func TestResidencyIsNeverViolated(t *testing.T) {
	r := newRig(t, rigConfig{channelA: "residency: kz", channelB: "residency: us", policy: "requireResidency: [kz]"})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	for i := 0; i < 10; i++ {
		got := r.post("/v1/chat/completions", chat("gpt-4o", false))
		if got.header.Get("X-Switchyard-Channel") == "chan-b" {
			t.Fatal("a request went to a channel outside requireResidency")
		}
	}
	if r.B.Requests("gpt-4o") != 0 {
		t.Errorf("B (residency us) saw %d requests", r.B.Requests("gpt-4o"))
	}
	if r.A.Requests("gpt-4o") < 6 {
		t.Errorf("panic routing should keep sending to the only resident channel, A saw %d", r.A.Requests("gpt-4o"))
	}
}

func TestPanicRoutingWhenEveryChannelIsOut(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500})
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500})
	for i := 0; i < 8; i++ {
		r.post("/v1/chat/completions", chat("gpt-4o", false))
	}
	if r.phase("chan-a", "gpt-4o") != "Ejected" || r.phase("chan-b", "gpt-4o") != "Ejected" {
		t.Fatal("both channels should be ejected")
	}
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{})
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 200 {
		t.Errorf("panic routing: %d %s", got.status, got.body)
	}
	panicGauge := func() string {
		resp, err := http.Get(r.admin.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			// The rig's manifests have no namespace: the label is there, empty.
			if series, value, ok := strings.Cut(line, " "); ok && series == `switchyard_model_panic_routing{model="gpt-4o",namespace=""}` {
				return strings.TrimSpace(value)
			}
		}
		return "absent"
	}
	r.step(0)
	if g := panicGauge(); g != "1" {
		t.Errorf("panic routing is not visible in the metrics: gauge %s", g)
	}
	// B recovers through cooldown, probes and the first ramp step: routable again, no more panic.
	r.step(5*time.Minute + time.Second)
	for i := 0; i < 3; i++ {
		r.step(10 * time.Second)
	}
	if p := r.phase("chan-b", "gpt-4o"); p != "RampingUp" {
		t.Fatalf("B should be ramping up, is %s", p)
	}
	for i := 0; i < 30; i++ { // the 5% step: some requests go to B first, all succeed through B
		r.post("/v1/chat/completions", chat("gpt-4o", false))
	}
	r.step(time.Second)
	if g := panicGauge(); g != "0" {
		t.Errorf("the panic gauge did not go back to 0 once a channel was routable: %s", g)
	}
}
