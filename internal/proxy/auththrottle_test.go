package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/switchyard-io/switchyard/internal/proxy/clients"
)

// Requests refused for their model (403) count against the client's request limit, as any
// other: three 403s use up a limit of 3, and the next request, for an allowed model, gets 429.
func TestRefusedModelsCountAgainstTheRequestLimit(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.writeClients(clientsManifest("one: "+clientKeyOne, "limits: {requestsPerMinute: 3}"))
	auth := []string{"Authorization", "Bearer " + clientKeyOne}
	for i := range 3 {
		if got := r.post("/v1/chat/completions", chat("gpt-4.1", false), auth...); got.status != 403 || errorCode(t, got.body) != "model_not_allowed" {
			t.Fatalf("request %d: %d %s, want 403 model_not_allowed", i, got.status, got.body)
		}
	}
	got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...)
	if got.status != 429 || errorCode(t, got.body) != "client_rate_limit_exceeded" {
		t.Fatalf("after three refused requests: %d %s, want 429", got.status, got.body)
	}
	if r.A.Requests("gpt-4o")+r.B.Requests("gpt-4o") != 0 {
		t.Error("a request over the limit reached a provider")
	}
}

// postFrom is rig.post from the local address ip (a loopback address), so a test can be two
// sources.
func (r *rig) postFrom(ip string, headers ...string) reply {
	r.t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, r.api.URL+"/v1/chat/completions", strings.NewReader(chat("gpt-4o", false)))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := (&http.Client{Transport: tr}).Do(req.WithContext(ctx))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// Failed keys are throttled per source address: a burst of 20, then 2 a second. A throttled
// source gets 429 too_many_auth_failures before its key is looked at (a right key too, so the
// answer says nothing about the key); another source is not affected; time gives tokens back.
func TestFailedKeysAreThrottledPerSource(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	wrong := []string{"Authorization", "Bearer sk-guess-7d1e4b9a2c6f0e8b3d5a1c7e"}
	right := []string{"Authorization", "Bearer " + clientKeyOne}
	for i := range clients.AuthFailureBurst {
		if got := r.postFrom("127.0.0.1", wrong...); got.status != 401 {
			t.Fatalf("guess %d: %d, want 401", i, got.status)
		}
	}
	for _, h := range [][]string{wrong, nil, right} {
		got := r.postFrom("127.0.0.1", h...)
		if got.status != 429 || errorCode(t, got.body) != "too_many_auth_failures" || got.header.Get("Retry-After") != "1" {
			t.Fatalf("after the burst (%v): %d Retry-After %q %s, want 429 too_many_auth_failures", h != nil, got.status, got.header.Get("Retry-After"), got.body)
		}
	}
	if got := r.postFrom("127.0.0.2", right...); got.status != 200 {
		t.Fatalf("another source: %d %s", got.status, got.body)
	}
	r.clock.Advance(500 * time.Millisecond) // one token back
	if got := r.postFrom("127.0.0.1", right...); got.status != 200 {
		t.Fatalf("a right key once a token is back: %d %s", got.status, got.body)
	}
	if got := r.postFrom("127.0.0.1", wrong...); got.status != 401 {
		t.Fatalf("a guess once a token is back: %d, want 401", got.status)
	}
	if got := r.postFrom("127.0.0.1", wrong...); got.status != 429 {
		t.Fatalf("the next guess: %d, want 429", got.status)
	}
	if v := testutil.ToFloat64(r.srv.clients.metrics.authFailures.WithLabelValues("throttled")); v != 4 {
		t.Errorf("auth failures throttled %v, want 4", v)
	}
	if v := testutil.ToFloat64(r.srv.metrics.Rejected.WithLabelValues("too_many_auth_failures")); v != 4 {
		t.Errorf("rejected too_many_auth_failures %v, want 4", v)
	}
}
