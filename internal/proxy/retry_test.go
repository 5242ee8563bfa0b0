package proxy

import (
	"strings"
	"testing"
	"time"

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
	got = r.post("/v1/chat/completions", chat("gpt-4.1", false))
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

func TestRetryBudget(t *testing.T) {
	b := newRetryBudget()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	// A quiet service can always fail over: the floor allows a few retries per second.
	allowed := 0
	for i := 0; i < 100; i++ {
		if b.allowRetry(now, 20) {
			allowed++
		}
	}
	if allowed != budgetFloorPerSecond*budgetBuckets {
		t.Errorf("floor: %d retries allowed with no traffic, want %d", allowed, budgetFloorPerSecond*budgetBuckets)
	}
	// Under load the budget is a share of requests: 20% of 1000 requests in the window.
	b = newRetryBudget()
	for s := 0; s < 10; s++ {
		for i := 0; i < 100; i++ {
			b.request(now.Add(time.Duration(s) * time.Second))
		}
	}
	at := now.Add(9 * time.Second)
	allowed = 0
	for i := 0; i < 1000; i++ {
		if b.allowRetry(at, 20) {
			allowed++
		}
	}
	if allowed != 200 {
		t.Errorf("storm guard: %d retries allowed, want 200 (20%% of 1000)", allowed)
	}
	// The window slides: ten seconds later the old requests and retries are forgotten.
	if !b.allowRetry(at.Add(11*time.Second), 20) {
		t.Error("budget did not recover once the window moved on")
	}
}
