package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// singleChannel is a policy whose model has one channel, so the same-channel retry rules apply.
var singleChannel = rigConfig{extra: "retry: {maxAttempts: 3, backoff: {base: 10ms, max: 50ms}}"}

func TestSameChannelRetryOnlyWhenNoOtherChannel(t *testing.T) {
	r := newRig(t, singleChannel)
	// The "others" policy (gpt-4o-mini, gpt-4.1) gets channel A only.
	cfg := strings.Replace(singleChannel.render(r.aURL, r.bURL), "  models: [gpt-4o-mini, gpt-4.1]\n  channels: [{name: chan-a}, {name: chan-b}]",
		"  models: [gpt-4o-mini, gpt-4.1]\n  channels: [{name: chan-a}]", 1)
	writeFile(t, r.dir, cfg)
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}

	r.A.SetBehavior("gpt-4o-mini", mockprovider.Behavior{FailFirst: 1, Status: 502})
	got := r.post("/v1/chat/completions", chat("gpt-4o-mini", false))
	if got.status != 200 || got.header.Get("X-Switchyard-Attempts") != "2" || r.A.Requests("gpt-4o-mini") != 2 {
		t.Errorf("5xx on the only channel: status %d attempts %s, A saw %d; want a second attempt after back-off",
			got.status, got.header.Get("X-Switchyard-Attempts"), r.A.Requests("gpt-4o-mini"))
	}

	// A timeout is never retried on the same channel: a silent provider costs one timeout.
	r.A.SetBehavior("gpt-4.1", mockprovider.Behavior{Mode: mockprovider.ModeHang})
	start := time.Now()
	got = r.post("/v1/chat/completions", chat("gpt-4.1", true))
	if got.status != 503 || r.A.Requests("gpt-4.1") != 1 {
		t.Errorf("timeout on the only channel: status %d, A saw %d; want 503 after one attempt", got.status, r.A.Requests("gpt-4.1"))
	}
	if !strings.Contains(got.body, "firstByte") {
		t.Errorf("the 503 should say what failed: %s", got.body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a silent provider cost %s, want one firstByte (400ms)", d)
	}
}

func TestRejectedCredentialsFailOverAndNeverReachTheClient(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 401, Message: "Incorrect API key provided: sk-proj-****wxyz"})
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 200 || got.header.Get("X-Switchyard-Channel") != "chan-b" {
		t.Errorf("401 from A: status %d from %q, want 200 from chan-b", got.status, got.header.Get("X-Switchyard-Channel"))
	}
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 403, Message: "key sk-b-****1234 is disabled"})
	got = r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 503 || strings.Contains(got.body, "****") || !strings.Contains(got.body, "rejected the channel's credentials") {
		t.Errorf("both keys rejected: %d %s", got.status, got.body)
	}
}

func TestOversizedAnswerIsNotTruncatedInto200(t *testing.T) {
	old := maxUpstreamBody
	maxUpstreamBody = 64
	defer func() { maxUpstreamBody = old }()
	r := newRig(t, rigConfig{policy: "panicRouting: false"})
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status == 200 {
		t.Errorf("an answer over the limit went out as 200: %s", got.body)
	}
	if !strings.Contains(got.body, "exceeds the proxy's") {
		t.Errorf("the 503 does not say why: %s", got.body)
	}
}

func TestProbesUseTheAPIRealTrafficUses(t *testing.T) {
	r := newRig(t, rigConfig{})
	// Real traffic for gpt-4o on A goes to /v1/embeddings.
	if got := r.post("/v1/embeddings", `{"model":"gpt-4o","input":"hello"}`); got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500})
	for i := 0; i < 6; i++ {
		r.post("/v1/embeddings", `{"model":"gpt-4o","input":"hello"}`)
	}
	if p := r.phase("chan-a", "gpt-4o"); p != "Ejected" {
		t.Fatalf("phase %s", p)
	}
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{})
	r.step(5*time.Minute + time.Second)
	if !strings.Contains(r.accessLog.String(), `"probe":true`) {
		t.Fatal("no probe sent")
	}
	// The probe copied the real traffic's API and succeeded.
	if p := r.phase("chan-a", "gpt-4o"); p != "Probing" {
		t.Errorf("after one good probe: %s", p)
	}
	if path, _ := probeRequest("/embeddings", "gpt-4o"); path != "/embeddings" {
		t.Errorf("probe path %s", path)
	}
	seen, _ := r.srv.apiPaths.Load(health.Key{Channel: "chan-a", Model: "gpt-4o"})
	if seen != "/embeddings" {
		t.Errorf("remembered path %v, want /embeddings", seen)
	}

	// A probe the provider refuses with a 4xx fails (journaled), instead of leaving the channel
	// in Probing forever.
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 400})
	r.step(10 * time.Second)
	if p := r.phase("chan-a", "gpt-4o"); p != "Ejected" {
		t.Errorf("after a refused probe: %s, want Ejected (ProbeFailed)", p)
	}
	evs := r.srv.EventsSince(0)
	last := evs.Events[len(evs.Events)-1]
	if last.Reason != "ProbeFailed" || !strings.Contains(last.Message, "server_error") {
		t.Errorf("last event %+v", last)
	}
}
