package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// rawConn opens a TCP connection to the rig's API port and writes s.
func rawConn(t *testing.T, r *rig, s string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.api.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
	return c
}

// readStatus reads the status line and headers of the answer on c, waiting at most 10s.
func readStatus(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return resp
}

func (r *rig) metrics() string {
	r.t.Helper()
	resp, err := http.Get(r.admin.URL + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A client that sends part of its body and stalls gets 408 after the body read timeout, and the
// buffer it held is given back.
func TestStalledBodyIsCutByTheReadDeadline(t *testing.T) {
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.BodyReadTimeout = 300 * time.Millisecond })
	c := rawConn(t, r, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"model\":\"gpt-4o\",")
	resp := readStatus(t, c)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	m := r.metrics()
	for _, want := range []string{`switchyard_rejected_requests_total{reason="body_timeout"} 1`, "switchyard_request_body_bytes_buffered 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if r.A.Requests("gpt-4o")+r.B.Requests("gpt-4o") != 0 {
		t.Error("a partial body reached a provider")
	}
}

// Bodies held in memory are bounded across requests: stalled clients holding the budget make
// the next large body wait outside (503 with Retry-After), not grow the heap.
func TestBufferedBodiesAreBounded(t *testing.T) {
	r := newRigOpts(t, rigConfig{}, func(o *Options) {
		o.MaxBufferedBodyBytes = 3 << 20
		o.BodyReadTimeout = 30 * time.Second
	})
	if r.srv.opts.MaxBodyBytes != 4<<20 {
		t.Errorf("default body cap %d, want 4 MiB", r.srv.opts.MaxBodyBytes)
	}
	// Two clients announce 2 MiB each and stall after 1.5 MiB: the second cannot get its buffer.
	part := strings.Repeat("x", 1536<<10)
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2097152\r\n\r\n"
	first := rawConn(t, r, head+part)
	// Wait for the event the refusal depends on: the first body holds its grown buffer (1 MiB+1,
	// doubled when full). Written back to back, the two handlers race for the budget: either the
	// second starts first and the first is refused, or each is refused growing past the other.
	held := int64(2 * (1<<20 + 1))
	deadline := time.Now().Add(10 * time.Second)
	for r.srv.bodyBytes.Load() != held {
		if time.Now().After(deadline) {
			t.Fatalf("the first body holds %d bytes after 10s, want %d", r.srv.bodyBytes.Load(), held)
		}
		time.Sleep(time.Millisecond)
	}
	second := rawConn(t, r, head+part)
	resp := readStatus(t, second)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if m := r.metrics(); !strings.Contains(m, `switchyard_rejected_requests_total{reason="overloaded"} 1`) {
		t.Errorf("the refusal is not counted:\n%s", grepLines(m, "rejected"))
	}
	first.Close()
}

// Requests in flight are bounded: beyond the limit, 503 with Retry-After, counted.
func TestRequestsInFlightAreBounded(t *testing.T) {
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.MaxInFlight = 2 })
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Latency: 2 * time.Second})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); r.post("/v1/chat/completions", chat("gpt-4o", false)) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.A.Requests("gpt-4o") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // waiting for an event: both requests reached A
	}
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != http.StatusServiceUnavailable || got.header.Get("Retry-After") == "" || !strings.Contains(got.body, `"code":"overloaded"`) {
		t.Errorf("third request: %d Retry-After %q: %s", got.status, got.header.Get("Retry-After"), got.body)
	}
	wg.Wait()
	if got := r.post("/v1/chat/completions", chat("gpt-4o-mini", false)); got.status != 200 {
		t.Errorf("after the others finished: %d", got.status)
	}
}

// A client that stops reading a stream loses it after the client write timeout: the upstream
// request is cancelled instead of being held for as long as the upstream keeps sending.
func TestClientThatNeverReadsReleasesTheUpstream(t *testing.T) {
	upstreamDone := make(chan struct{})
	r := streamRigOpts(t, func(w http.ResponseWriter, req *http.Request) {
		defer close(upstreamDone)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		chunk := chunkEvent(strings.Repeat("z", 16<<10), false)
		for i := 0; i < 100000; i++ { // far more than any socket buffers; bounded
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if req.Context().Err() != nil {
				return
			}
		}
	}, func(o *Options) { o.ClientWriteTimeout = 300 * time.Millisecond })
	c := rawConn(t, r, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+
		fmt.Sprint(len(chat("gpt-4o", true)))+"\r\n\r\n"+chat("gpt-4o", true))
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	select { // the client reads nothing
	case <-upstreamDone:
	case <-time.After(15 * time.Second):
		t.Fatal("the upstream is still held by a client that reads nothing")
	}
}

// Provider error bodies often quote the key they were sent: it reaches neither the client (in a
// 503 message or a passed-through 4xx) nor the access log.
func TestProviderKeysInUpstreamErrorsAreRedacted(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500,
		Message: "internal error for key " + keyA + " (account sk-proj-Zx81kd02msLq)"})
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 502,
		Message: "bad gateway; key " + keyB[:10] + "********"})
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 503 {
		t.Fatalf("status %d: %s", got.status, got.body)
	}
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 400, Message: "invalid request for key " + keyB})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 422, Message: "unprocessable, key " + keyA})
	passed := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if passed.status != 422 {
		t.Fatalf("status %d: %s", passed.status, passed.body)
	}
	for what, text := range map[string]string{"503 body": got.body, "4xx body": passed.body, "access log": r.accessLog.String(), "log": r.logs.String()} {
		for _, secret := range []string{keyA, keyB, keyB[:10], "sk-proj-Zx81kd02msLq"} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s carries %q: %s", what, secret, text)
			}
		}
	}
	if !strings.Contains(got.body, "[REDACTED]") || !strings.Contains(passed.body, "unprocessable, key [REDACTED]") {
		t.Errorf("redaction lost the rest of the message: %s / %s", got.body, passed.body)
	}
}

// A second top-level member that differs from "model" (or "stream") only in case would be routed
// and metered as one model and served as another by a case-insensitive upstream: refused.
func TestCaseVariantRoutingFieldsAreRefused(t *testing.T) {
	r := newRig(t, rigConfig{})
	for _, body := range []string{
		`{"model":"gpt-4o","MODEL":"o1-pro","messages":[]}`,
		`{"Model":"o1-pro","model":"gpt-4o","messages":[]}`,
		`{"model":"gpt-4o","Stream":true,"messages":[]}`,
		"{\"model\":\"gpt-4o\",\"\u017ftream\":true}", // the long s folds to s, as encoding/json matches it
	} {
		got := r.post("/v1/chat/completions", body)
		if got.status != 400 || !strings.Contains(got.body, `"code":"ambiguous_field"`) {
			t.Errorf("%s: %d %s", body, got.status, got.body)
		}
	}
	if n := r.A.Requests("gpt-4o") + r.B.Requests("gpt-4o"); n != 0 {
		t.Errorf("%d refused requests reached a provider", n)
	}
	// The same member twice is no ambiguity: both are rewritten to the upstream name.
	if got := r.post("/v1/chat/completions", `{"model":"gpt-4o","model":"gpt-4o","messages":[]}`); got.status != 200 {
		t.Errorf("a repeated model: %d %s", got.status, got.body)
	}
}

// Only the allow-listed client headers go upstream; the provider's account headers do not come
// back; the request id is the proxy's own unless a trusted header is configured.
func TestWhatCrossesTheProxy(t *testing.T) {
	var seen http.Header
	var mu sync.Mutex
	r := streamRig(t, func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = req.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Openai-Organization", "org-gateway-account")
		w.Header().Set("Openai-Project", "proj_gateway")
		w.Header().Set("Openai-Processing-Ms", "12")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "99")
		_, _ = io.WriteString(w, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	})
	got := r.post("/v1/chat/completions", chat("gpt-4o", false),
		"Openai-Organization", "org-client-chosen", "Cookie", "session=1", "X-Internal-Token", "t0ken",
		"X-Forwarded-For", "10.0.0.1", "Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"Openai-Beta", "assistants=v2", "X-Stainless-Lang", "js", "Idempotency-Key", "k-1", "X-Request-Id", "forged-id")
	if got.status != 200 {
		t.Fatalf("status %d: %s", got.status, got.body)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"Openai-Organization", "Cookie", "X-Internal-Token", "X-Forwarded-For"} {
		if v := seen.Get(name); v != "" {
			t.Errorf("upstream got %s: %q", name, v)
		}
	}
	for _, name := range []string{"Traceparent", "Openai-Beta", "X-Stainless-Lang", "Idempotency-Key"} {
		if seen.Get(name) == "" {
			t.Errorf("upstream did not get %s", name)
		}
	}
	for _, name := range []string{"Openai-Organization", "Openai-Project"} {
		if v := got.header.Get(name); v != "" {
			t.Errorf("the client got the provider account's %s: %q", name, v)
		}
	}
	if got.header.Get("Openai-Processing-Ms") == "" || got.header.Get("X-Ratelimit-Remaining-Requests") == "" {
		t.Errorf("the client lost the answer's own headers: %v", got.header)
	}
	if id := got.header.Get("X-Request-Id"); id == "forged-id" || seen.Get("X-Request-Id") != id {
		t.Errorf("request id: client sees %q, upstream %q; want one made by the proxy", id, seen.Get("X-Request-Id"))
	}

	// Go and process collectors are on /metrics.
	m := r.metrics()
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes", "switchyard_requests_in_flight"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestTrustedRequestIDHeader(t *testing.T) {
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.RequestIDHeader = "X-Request-Id" })
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), "X-Request-Id", "lb-1234"); got.header.Get("X-Request-Id") != "lb-1234" {
		t.Errorf("the trusted header's id was not kept: %q", got.header.Get("X-Request-Id"))
	}
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), "X-Request-Id", "bad id\"}"); got.header.Get("X-Request-Id") == "bad id\"}" {
		t.Error("an id with spaces and quotes was kept")
	}
}

// A request with both Content-Length and Transfer-Encoding (a smuggling attempt: a front proxy
// may frame it by one, Go by the other) is refused, as is any chunked body.
func TestAmbiguousFramingIsRefused(t *testing.T) {
	r := newRig(t, rigConfig{})
	body := chat("gpt-4o", false)
	c := rawConn(t, r, fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body))
	resp := readStatus(t, c)
	if resp.StatusCode != http.StatusLengthRequired {
		t.Errorf("status %d, want 411", resp.StatusCode)
	}
	if r.A.Requests("gpt-4o") != 0 {
		t.Error("the request reached a provider")
	}
	if m := r.metrics(); !strings.Contains(m, `switchyard_rejected_requests_total{reason="framing"} 1`) {
		t.Errorf("not counted:\n%s", grepLines(m, "rejected"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// streamRigOpts is a rig whose channel A is the handler h (streamRig), with the proxy's Options
// adjusted by opt.
func streamRigOpts(t *testing.T, h http.HandlerFunc, opt func(*Options)) *rig {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	r := newRigOpts(t, rigConfig{}, opt)
	cfg := strings.Replace(rigConfig{}.render(r.aURL, r.bURL), r.aURL+"/v1", up.URL+"/v1", 1)
	// A stall must not end the stream early: the tests decide when the upstream goes on.
	cfg = strings.ReplaceAll(cfg, "streamIdle: 300ms", "streamIdle: 10s")
	writeFile(t, r.dir, cfg)
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	return r
}
