package proxy

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// TestHungPrimaryFailsOverEveryRequestInFlight is the demo's outage over real HTTP: a provider
// hangs, so every non-streamed request in flight on it runs out its whole request timeout at
// about the same moment, and they all retry at once. The engine ejects the channel after the
// first few timeouts; the retries after that leave an ejected channel for a routable one, which
// is failover, not a storm, and the retry budget must not refuse them (with 60 requests in its
// window the budget's limit is its floor of 30: charged as before, half of them got a 503).
func TestHungPrimaryFailsOverEveryRequestInFlight(t *testing.T) {
	r := newRig(t, rigConfig{})
	// A short request timeout keeps the test short (B answers at once within the fallback's).
	cfg := strings.ReplaceAll(rigConfig{}.render(r.aURL, r.bURL), defaultTimeouts,
		"timeouts: {request: 1s, fallbackRequest: 1s, firstByte: 400ms, streamIdle: 300ms}")
	writeFile(t, r.dir, cfg)
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	if e := r.configError(); e != "" {
		t.Fatalf("the short timeouts were not applied: %s", e)
	}
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeHang})

	// The health clock stands still: every request, timeout and retry falls in one second of
	// the budget's window, as in the demo's burst.
	const n = 60
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = r.post("/v1/chat/completions", chat("gpt-4o", false))
		}()
	}
	wg.Wait()

	if got := r.A.Requests("gpt-4o"); got != n {
		t.Fatalf("A saw %d requests, want all %d (each hung until its request timeout)", got, n)
	}
	if ph := r.phase("chan-a", "gpt-4o"); ph != "Ejected" {
		t.Fatalf("chan-a × gpt-4o is %s after %d timeouts, want Ejected (the scenario's premise)", ph, n)
	}
	failed := map[string]int{}
	for _, rep := range replies {
		switch {
		case rep.err != nil:
			failed[rep.err.Error()]++
		case rep.status != 200 || rep.header.Get("X-Switchyard-Channel") != "chan-b" || rep.header.Get("X-Switchyard-Attempts") != "2":
			failed[fmt.Sprintf("%d from %q after %s attempt(s): %.120s", rep.status, rep.header.Get("X-Switchyard-Channel"), rep.header.Get("X-Switchyard-Attempts"), rep.body)]++
		}
	}
	for what, count := range failed {
		t.Errorf("%d of %d clients got %s; want every one answered by chan-b on its second attempt", count, n, what)
	}
	for _, l := range strings.Split(r.metrics(), "\n") {
		if strings.HasPrefix(l, "switchyard_retry_budget_exhausted_total{") {
			t.Errorf("the budget refused retries away from the ejected channel: %s", l)
		}
	}
}
