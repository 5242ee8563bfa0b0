package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/switchyard-io/switchyard/internal/proxy/clients"
)

// twoClients is a manifest of two GatewayClients that may use every model: team (clientKeyOne,
// with teamLimits) and other (clientKeyTwo).
func twoClients(teamLimits string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: team-keys}
stringData: {k: %s}
---
apiVersion: v1
kind: Secret
metadata: {name: other-keys}
stringData: {k: %s}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: team}
spec:
  keysSecretRef: {name: team-keys}
  models: ["*"]
  %s
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: other}
spec:
  keysSecretRef: {name: other-keys}
  models: ["*"]
`, clientKeyOne, clientKeyTwo, teamLimits)
}

// heldStreams is an upstream whose streams send one event and then wait until release (or the
// request ends): requests that stay in flight for as long as a test needs.
type heldStreams struct {
	held    atomic.Int64
	release chan struct{}
	wg      sync.WaitGroup
}

func newHeldStreams() *heldStreams { return &heldStreams{release: make(chan struct{})} }

func (h *heldStreams) handler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	_, _ = io.WriteString(w, chunkEvent("held", false))
	w.(http.Flusher).Flush()
	h.held.Add(1)
	defer h.held.Add(-1)
	select {
	case <-h.release:
	case <-r.Context().Done():
		return
	}
	_, _ = io.WriteString(w, chunkEvent("", true)+"data: [DONE]\n\n")
}

// start sends a stream with key in the background; it ends when the upstream is released.
func (h *heldStreams) start(t *testing.T, r *rig, key string) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.api.URL+"/v1/chat/completions", strings.NewReader(chat("gpt-4o", true)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("held stream: %v", err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("held stream: %d", resp.StatusCode)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
}

// waitHeld waits (bounded) until n streams are held upstream.
func (h *heldStreams) waitHeld(t *testing.T, n int64) {
	t.Helper()
	for range 1000 {
		if h.held.Load() >= n {
			return
		}
		time.Sleep(10 * time.Millisecond) // waiting for an event: the streams reached the upstream
	}
	t.Fatalf("%d streams held upstream, want %d", h.held.Load(), n)
}

func (h *heldStreams) finish() { close(h.release); h.wg.Wait() }

// A client's maxInFlight bounds its requests being served: beyond it 429
// concurrency_limit_exceeded, counted, while another client is served; a slot is free again
// once a request ends.
func TestClientMaxInFlight(t *testing.T) {
	up := newHeldStreams()
	r := streamRigOpts(t, up.handler, nil)
	r.writeClients(twoClients("limits: {maxInFlight: 2}"))
	up.start(t, r, clientKeyOne)
	up.start(t, r, clientKeyOne)
	up.waitHeld(t, 2)
	got := r.post("/v1/chat/completions", chat("gpt-4o", false), "Authorization", "Bearer "+clientKeyOne)
	if got.status != 429 || errorCode(t, got.body) != "concurrency_limit_exceeded" || got.header.Get("Retry-After") == "" {
		t.Fatalf("a third request: %d Retry-After %q %s, want 429 concurrency_limit_exceeded", got.status, got.header.Get("Retry-After"), got.body)
	}
	up.start(t, r, clientKeyTwo) // another client is not held to team's limit
	up.waitHeld(t, 3)
	if v := testutil.ToFloat64(r.srv.clients.metrics.limited.WithLabelValues("", "team", clients.LimitMaxInFlight)); v != 1 {
		t.Errorf("limited maxInFlight %v, want 1", v)
	}
	up.finish()
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), "Authorization", "Bearer "+clientKeyOne); got.status != 200 {
		t.Fatalf("after the streams ended: %d %s", got.status, got.body)
	}
}

// While the proxy's --max-in-flight is contended (above 3/4 of it), a client over its fair share
// (the limit over the clients with requests in flight) gets 429 capacity_exceeded, and the other
// client still gets a slot.
func TestFairShareOfRequestsInFlight(t *testing.T) {
	up := newHeldStreams()
	r := streamRigOpts(t, up.handler, func(o *Options) { o.MaxInFlight = 8 })
	r.writeClients(twoClients(""))
	up.start(t, r, clientKeyTwo)
	up.waitHeld(t, 1)
	for range 5 { // team takes 5 of 8: 6 in flight, at 3/4, not above it
		up.start(t, r, clientKeyOne)
	}
	up.waitHeld(t, 6)
	got := r.post("/v1/chat/completions", chat("gpt-4o", false), "Authorization", "Bearer "+clientKeyOne)
	if got.status != 429 || errorCode(t, got.body) != "capacity_exceeded" {
		t.Fatalf("team over its share of 4: %d %s, want 429 capacity_exceeded", got.status, got.body)
	}
	up.start(t, r, clientKeyTwo) // other has 1 of its 4
	up.waitHeld(t, 7)
	if v := testutil.ToFloat64(r.srv.clients.metrics.limited.WithLabelValues("", "team", clients.LimitFairShare)); v != 1 {
		t.Errorf("limited fairShare %v, want 1", v)
	}
	if v := testutil.ToFloat64(r.srv.clients.metrics.limited.WithLabelValues("", "other", clients.LimitFairShare)); v != 0 {
		t.Errorf("other limited %v, want 0", v)
	}
	up.finish()
}

// While the body budget is contended, a client holding more than its fair share of it gets 429
// capacity_exceeded for the next body, and the buffer it would have held is not taken.
func TestFairShareOfTheBodyBudget(t *testing.T) {
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.MaxBufferedBodyBytes = 4000; o.BodyReadTimeout = 10 * time.Second })
	r.writeClients(twoClients(""))
	stall := func(key string) {
		// Content-Length 1000 and no body: 1,001 bytes of the budget held (readAllSized's reserve).
		rawConn(t, r, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer "+key+"\r\nContent-Length: 1000\r\n\r\n{")
	}
	waitBytes := func(n int64) {
		t.Helper()
		for range 1000 {
			if r.srv.bodyBytes.Load() >= n {
				return
			}
			time.Sleep(10 * time.Millisecond) // waiting for an event: the server holds the buffer
		}
		t.Fatalf("%d body bytes held, want %d", r.srv.bodyBytes.Load(), n)
	}
	stall(clientKeyTwo)
	waitBytes(1001)
	stall(clientKeyOne)
	waitBytes(2002)
	// A third 1,001 bytes would make 3,003 of 4,000 (above 3/4) and team's 2,002 above its 2,000.
	c := rawConn(t, r, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer "+clientKeyOne+"\r\nContent-Length: 1000\r\n\r\n{")
	resp := readStatus(t, c)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || errorCode(t, string(b)) != "capacity_exceeded" {
		t.Fatalf("team's second stalled body: %d %s, want 429 capacity_exceeded", resp.StatusCode, b)
	}
	if n := r.srv.bodyBytes.Load(); n != 2002 {
		t.Errorf("%d body bytes held after the refusal, want 2002", n)
	}
	if v := testutil.ToFloat64(r.srv.clients.metrics.limited.WithLabelValues("", "team", clients.LimitFairShare)); v != 1 {
		t.Errorf("limited fairShare %v, want 1", v)
	}
}
