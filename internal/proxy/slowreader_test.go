package proxy

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy/recovery"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// slowRig is a proxy in front of two mocks of one provider (c0 first, c1 to fail over or
// continue on), with a detection that ejects on the first failure and streamRecovery Continue:
// anything that counted a client's slowness against c0 would show. Its API port sends through
// small socket buffers, so a client that stops reading blocks the proxy's writes at once.
type slowRig struct {
	*rig
	mocks    [2]*mockprovider.Server
	auditLog string
	apiAddr  string
}

const slowRigStreamIdle = 250 * time.Millisecond

// slowRigText is a long answer: far more than the socket buffers between proxy and client.
var slowRigText = strings.Repeat("lorem ipsum dolor sit amet, ", 4000)

// policyExtra is added to the policy's spec (it overrides streamRecovery), docs after it.
func newSlowRig(t *testing.T, provider, policyExtra, docs string, opt func(*Options)) *slowRig {
	t.Helper()
	r := &rig{t: t, clock: &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}, logs: &testutil.SyncBuffer{}, accessLog: &testutil.SyncBuffer{}}
	sr := &slowRig{rig: r, auditLog: filepath.Join(t.TempDir(), "audit.log")}
	var manifest strings.Builder
	for i := range sr.mocks {
		m := mockprovider.New(mockprovider.Options{Name: fmt.Sprintf("c%d", i)})
		m.SetDefault(mockprovider.Behavior{Text: slowRigText, ChunkBytes: 64})
		ts := httptest.NewServer(m)
		t.Cleanup(func() { m.Close(); ts.Close() })
		sr.mocks[i] = m
		fmt.Fprintf(&manifest, `---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: c%d}
spec:
  provider: %s
  baseURL: %s/v1
  models: [{name: m, capabilities: {prefill: true}}]
  failureDomain: {region: r%d}
  timeouts: {request: 30s, fallbackRequest: 30s, firstByte: 10s, streamIdle: %s}
`, i, provider, ts.URL, i, slowRigStreamIdle)
	}
	fmt.Fprintf(&manifest, `---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [m]
  channels: [{name: c0}, {name: c1}]
  strategy: Priority
  detection: {consecutiveFailures: 1}
%s
%s`, indent(cmp.Or(policyExtra, "streamRecovery: Continue")), docs)
	log, err := audit.Open(audit.Options{Path: sr.auditLog})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Clock: r.clock, Logger: slog.New(slog.NewJSONHandler(r.logs, nil)), AccessLog: r.accessLog, Replica: "test",
		Audit: log, ClientWriteTimeout: 2 * time.Second}
	if opt != nil {
		opt(&o)
	}
	r.srv = New(o)
	r.api = httptest.NewUnstartedServer(r.srv.Handler())
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.api.Listener = smallBuffers{inner}
	r.api.Start()
	sr.apiAddr = strings.TrimPrefix(r.api.URL, "http://")
	r.admin = httptest.NewServer(r.srv.AdminHandler())
	r.dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(r.dir, "gateway.yaml"), []byte(manifest.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r.src = &source.FileSource{Path: r.dir, Getenv: func(string) string { return "" }}
	if err := r.src.Load(r.srv); err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	t.Cleanup(func() { r.api.Close(); r.admin.Close(); r.srv.WaitProbes(); _ = log.Close() })
	return sr
}

// smallBuffers gives every accepted connection a small send buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// slowClient sends a request on a connection with a small receive buffer (set before the
// handshake, so the window stays small) and returns the connection and its reader, positioned
// after the response headers.
func (sr *slowRig) slowClient(path, body string, headers ...string) (net.Conn, *bufio.Reader, *http.Response) {
	t := sr.t
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	c, err := d.DialContext(context.Background(), "tcp", sr.apiAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, len(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req += headers[i] + ": " + headers[i+1] + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(c, 1<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return c, br, resp
}

// waitAccessLog waits (bounded) until the access log has n lines, and returns them.
func (sr *slowRig) waitAccessLog(n int) []map[string]any {
	sr.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var lines []map[string]any
		for l := range strings.SplitSeq(strings.TrimSpace(sr.accessLog.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil {
				lines = append(lines, m)
			}
		}
		if len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			sr.t.Fatalf("%d access log lines, want %d:\n%s", len(lines), n, sr.accessLog.String())
		}
		time.Sleep(20 * time.Millisecond) // waiting for an event: the proxy ends the attempt
	}
}

// waitServed waits (bounded) until the proxy has no request in flight: each one's audit line
// is recorded when its handler returns, after the client has its answer.
func waitServed(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.inFlight.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in flight", s.inFlight.Load())
		}
		time.Sleep(10 * time.Millisecond) // waiting for an event: the handlers return
	}
}

// auditLines closes the proxy's audit log and reads its request lines (not the end record
// Close writes).
func (sr *slowRig) auditLines() []audit.Line {
	sr.t.Helper()
	waitServed(sr.t, sr.srv)
	if err := sr.srv.opts.Audit.Close(); err != nil {
		sr.t.Fatal(err)
	}
	raw, _ := os.ReadFile(sr.auditLog)
	var out []audit.Line
	for l := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var line audit.Line
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			sr.t.Fatalf("audit line %q: %v", l, err)
		}
		if line.Record != "" {
			continue
		}
		out = append(out, line)
	}
	return out
}

// The slow-reader endpoints: chat/completions and the Messages API, each on channels that speak it.
var slowReaderCases = []struct {
	name, provider, path, body string
	messages                   bool
	policy                     string // policyExtra
}{
	{"chat", "openai", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, false, ""},
	{"messages", "anthropic", "/v1/messages", `{"model":"m","stream":true,"max_tokens":100000,"messages":[{"role":"user","content":"hi"}]}`, true, ""},
	{"responses", "openai", "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`, false, ""},
	{"messages-on-openai", "openai", "/v1/messages", `{"model":"m","stream":true,"max_tokens":100000,"messages":[{"role":"user","content":"hi"}]}`, true, ""},
	{"chat-pii", "openai", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi, I am ann@example.com"}]}`, false,
		"streamRecovery: Continue\npii: {mode: Mask, detectors: [email]}"},
}

// A client that pauses reading for longer than streamIdle (the proxy's writes blocked on it all
// the while) is not a provider stall: its answer goes on whole when it reads again, from the
// channel that started it, which stays Healthy; no continuation is asked of the other channel.
func TestSlowReaderIsNotAProviderStall(t *testing.T) {
	for _, tc := range slowReaderCases {
		t.Run(tc.name, func(t *testing.T) {
			sr := newSlowRig(t, tc.provider, tc.policy, "", nil)
			c, _, resp := sr.slowClient(tc.path, tc.body)
			defer c.Close()
			head := make([]byte, 512)
			if _, err := io.ReadFull(resp.Body, head); err != nil {
				t.Fatal(err)
			}
			// Four times streamIdle, under half the client write timeout: the proxy's write to
			// this client is blocked, and must stay so without a deadline passing.
			time.Sleep(4 * slowRigStreamIdle)
			rest, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the rest: %v", err)
			}
			if tc.path == "/v1/responses" {
				if !strings.Contains(string(rest), "response.completed") || strings.Contains(string(rest), "response.failed") {
					t.Fatalf("the responses stream did not complete: ...%s", tail(string(rest), 300))
				}
				if strings.Contains(string(head)+string(rest), "[DONE]") {
					t.Fatalf("a Responses stream got a [DONE], which OpenAI never sends: ...%s", tail(string(rest), 300))
				}
			} else if got := readStream(t, reply{status: 200, body: string(head) + string(rest)}, tc.messages); got.text != slowRigText || !got.complete || got.errored {
				t.Fatalf("the answer: %d bytes of %d, complete %v, errored %v", len(got.text), len(slowRigText), got.complete, got.errored)
			}
			lines := sr.waitAccessLog(1)
			if len(lines) != 1 || lines[0]["outcome"] != "success" || (tc.policy != "") != (lines[0]["pii"] != nil) {
				t.Errorf("access log: %v", lines)
			}
			if n := sr.mocks[1].Requests("m"); n != 0 {
				t.Errorf("%d requests (continuations) reached c1", n)
			}
			if p := sr.phase("c0", "m"); p != "Healthy" {
				t.Errorf("c0 is %s", p)
			}
		})
	}
}

// A client that stops reading until the client write timeout passes fails the stream itself:
// the access log says client_error, the audit line canceled with reason client_write_timeout, and
// nothing reaches the channel's health, the retry budget or stream recovery.
func TestClientWriteTimeoutIsTheClientsFailure(t *testing.T) {
	for _, tc := range slowReaderCases[:2] {
		t.Run(tc.name, func(t *testing.T) {
			sr := newSlowRig(t, tc.provider, "", "", func(o *Options) { o.ClientWriteTimeout = time.Second })
			c, _, resp := sr.slowClient(tc.path, tc.body)
			defer c.Close()
			if _, err := io.ReadFull(resp.Body, make([]byte, 512)); err != nil {
				t.Fatal(err)
			}
			lines := sr.waitAccessLog(1) // the client reads nothing more
			if len(lines) != 1 || lines[0]["outcome"] != "client_error" || !strings.Contains(fmt.Sprint(lines[0]["error"]), "client write timeout") {
				t.Fatalf("access log: %v", lines)
			}
			c.Close()
			if n := sr.mocks[1].Requests("m"); n != 0 {
				t.Errorf("%d requests (continuations) reached c1", n)
			}
			if p := sr.phase("c0", "m"); p != "Healthy" {
				t.Errorf("c0 is %s", p)
			}
			if m := sr.metrics(); strings.Contains(m, `outcome="stream_cut"`) || strings.Contains(m, "switchyard_stream_continuations_total{") {
				t.Errorf("the metrics count a cut or a recovery:\n%s", grepLines(m, "stream_cut")+grepLines(m, "continuations"))
			}
			al := sr.auditLines()
			if len(al) != 1 || al[0].Reason != reasonClientWriteTimeout || len(al[0].Attempts) != 1 || al[0].Attempts[0].Outcome != "canceled" {
				t.Fatalf("audit: %+v", al)
			}
		})
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// abandonRigDocs is a GatewayClient allowed 300 tokens a minute.
const abandonRigDocs = `---
apiVersion: v1
kind: Secret
metadata: {name: team-keys}
stringData: {one: ` + clientKeyOne + `}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: team}
spec:
  keysSecretRef: {name: team-keys}
  models: ["m"]
  limits: {tokensPerMinute: 300}
`

// A client that reads three quarters of a stream and hangs up before its usage event still
// spends tokens: the prompt (message_start's input on /v1/messages, else the estimate of the
// request's text) and the text relayed so far (estimated), marked estimated in the audit line and
// the access log, counted against its tokens per minute, so its next request gets 429. With
// streamRecovery Continue (the recovery's tap) and Error (a meter of its own).
func TestAbandonedStreamCountsTokens(t *testing.T) {
	const chunks, chunkBytes = 120, 20 // 2,400 bytes of text: about 600 tokens, 450 of them read
	text := strings.Repeat("abcdefghijklmnopqrs ", chunks)
	for _, tc := range []struct {
		name, provider, path, body, recovery string
		messages                             bool
	}{
		{"chat", "openai", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello there"}]}`, "Continue", false},
		{"chat-no-recovery", "openai", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello there"}]}`, "Error", false},
		{"messages", "anthropic", "/v1/messages", `{"model":"m","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"hello there"}]}`, "Continue", true},
		{"messages-no-recovery", "anthropic", "/v1/messages", `{"model":"m","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"hello there"}]}`, "Error", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := newSlowRig(t, tc.provider, "streamRecovery: "+tc.recovery, abandonRigDocs, nil)
			sr.mocks[0].SetDefault(mockprovider.Behavior{Text: text, ChunkBytes: chunkBytes, ChunkDelay: 5 * time.Millisecond})
			req, _ := http.NewRequest(http.MethodPost, sr.api.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+clientKeyOne)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			br := bufio.NewReader(resp.Body)
			var read, startInput int
			for read < chunks*3/4 {
				l, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("after %d chunks: %v", read, err)
				}
				switch {
				case strings.Contains(l, `"text_delta"`), strings.Contains(l, `"delta":{"content":"`):
					read++
				case strings.Contains(l, `"message_start"`):
					var ev struct {
						Message struct {
							Usage struct {
								InputTokens int `json:"input_tokens"`
							} `json:"usage"`
						} `json:"message"`
					}
					_ = json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(l), "data: ")), &ev)
					startInput = ev.Message.Usage.InputTokens
				}
			}
			resp.Body.Close()            // hung up before the usage event
			lines := sr.waitAccessLog(1) // the proxy has ended the attempt
			// The next request is over the limit.
			got := sr.post(tc.path, tc.body, "Authorization", "Bearer "+clientKeyOne)
			if got.status != http.StatusTooManyRequests || !strings.Contains(got.body, "tokens") {
				t.Fatalf("the next request: %d %s", got.status, got.body)
			}
			if len(lines) != 1 || lines[0]["outcome"] != "client_error" || lines[0]["estimated"] != true || lines[0]["tokens"] == nil {
				t.Fatalf("access log: %v", lines)
			}
			al := sr.auditLines()
			if len(al) != 2 {
				t.Fatalf("%d audit lines", len(al))
			}
			tok := al[0].Tokens
			minOut, maxOut := int64(recovery.EstTokens(chunks*3/4*chunkBytes)), int64(recovery.EstTokens(len(text)))
			if !tok.Estimated || tok.Completion < minOut || tok.Completion > maxOut || tok.Prompt <= 0 {
				t.Fatalf("audit tokens %+v, want estimated, completion in [%d, %d], a prompt", tok, minOut, maxOut)
			}
			if tc.messages && (startInput == 0 || tok.Prompt != int64(startInput)) {
				t.Errorf("prompt %d, message_start said %d", tok.Prompt, startInput)
			}
			if n := sr.mocks[1].Requests("m"); n != 0 {
				t.Errorf("%d requests reached c1", n)
			}
		})
	}
}

// flushFails is a client connection whose flushes fail as one past its write deadline does.
type flushFails struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushFails) FlushError() error { f.flushes++; return os.ErrDeadlineExceeded }

// The flush that should have handed the end of an answer to a client that stopped reading
// fails: the stream is the client's failure (client_write_timeout), not a success. The flush
// is found through the proxy's own writer (statusWriter), whose Flush cannot return the error.
func TestStreamFlushErrorIsTheClientsFailure(t *testing.T) {
	s := New(Options{Logger: slog.New(slog.DiscardHandler), ClientWriteTimeout: time.Second})
	for _, wrap := range []string{"statusWriter"} {
		t.Run(wrap, func(t *testing.T) {
			conn := &flushFails{ResponseRecorder: httptest.NewRecorder()}
			var w http.ResponseWriter = &statusWriter{ResponseWriter: conn}
			ch := &routing.Channel{Name: "c0", Timeouts: routing.Timeouts{StreamIdle: time.Minute, FirstByte: time.Minute, Request: time.Minute}}
			a := &attempt{channel: ch, model: "m", path: "/chat/completions", stream: true}
			body := chunkEvent("Hello", false) + chunkEvent("", true) + "data: [DONE]\n\n"
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(body))}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			res := s.relayStream(ctx, cancel, w, a, resp, stoppedTimer, stoppedTimer, time.Now())
			if !res.canceled || res.outcome.String() != "client_error" || res.reason != reasonClientWriteTimeout || conn.flushes == 0 {
				t.Fatalf("result %+v after %d flushes, want canceled for client_write_timeout", res, conn.flushes)
			}
		})
	}
}

// A client that hangs up while the provider still works on its first event spent the prompt
// all the same: its estimate counts (estimated) against the client's tokens per minute.
func TestAbandonedBeforeTheFirstEventCountsThePrompt(t *testing.T) {
	sr := newSlowRig(t, "openai", "", abandonRigDocs, nil)
	sr.mocks[0].SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeSlowFirstToken, FirstTokenDelay: 5 * time.Second})
	prompt := strings.Repeat("tell me more ", 100) // 1,300 bytes: about 325 tokens
	body := fmt.Sprintf(`{"model":"m","stream":true,"messages":[{"role":"user","content":%q}]}`, prompt)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sr.api.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+clientKeyOne)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for sr.mocks[0].Requests("m") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // waiting for an event: the request reached the provider
	}
	cancel() // hung up before the first event
	<-done
	lines := sr.waitAccessLog(1)
	if got := sr.post("/v1/chat/completions", body, "Authorization", "Bearer "+clientKeyOne); got.status != http.StatusTooManyRequests {
		t.Fatalf("the next request: %d %s", got.status, got.body)
	}
	if lines[0]["outcome"] != "client_error" || lines[0]["estimated"] != true {
		t.Fatalf("access log: %v", lines)
	}
	al := sr.auditLines()
	if tok := al[0].Tokens; !tok.Estimated || tok.Prompt != int64(recovery.EstTokens(len(prompt))) || tok.Completion != 0 {
		t.Fatalf("audit tokens %+v, want the prompt's estimate %d", tok, recovery.EstTokens(len(prompt)))
	}
}

// A client that hangs up on a stream's continuation spent the parts before it too: the part that
// broke counts its text and prompt (estimated) beside the continuation's own.
func TestAbandonedContinuationCountsThePartsBefore(t *testing.T) {
	var words strings.Builder // 600 bytes, 60 chunks of 10; no repeats (a continuation that repeats the text sent is held as a restart)
	for i := range 120 {
		fmt.Fprintf(&words, "w%03d ", i)
	}
	text := words.String()
	rr, audited := auditedRecoveryRig(t, recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
	rr.behave("cut;after=30;chunk_bytes=10;text="+text, "continue;chunk_bytes=10;chunk_delay=20ms;text="+text)
	resp, err := http.Post(rr.api.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hello there"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	read := 0
	for read < 45 { // 30 chunks from c0, 15 from the continuation on c1
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d chunks: %v", read, err)
		}
		if strings.Contains(l, `"delta":{"content":"`) {
			read++
		}
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(rr.accessLog.String(), "\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // waiting for an event: the continuation ends
	}
	waitServed(t, rr.srv)
	line, _ := audited()
	if want := int64(recovery.EstTokens(45 * 10)); !line.Tokens.Estimated || line.Tokens.Completion < want || line.Tokens.Prompt < 2*int64(recovery.EstTokens(len("hello there"))) {
		t.Fatalf("audit tokens %+v, want estimated, at least %d completion tokens and two prompts", line.Tokens, want)
	}
}

// An upstream that sends its finish_reason and closes only after a silence longer than the
// client write timeout (within streamIdle) completes the answer: the end the proxy writes for
// it gets a fresh write deadline, and the client, which reads all along, is not blamed.
func TestStreamEndAfterASilenceIsNoClientTimeout(t *testing.T) {
	r := streamRigOpts(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, chunkEvent("Hello", false)+chunkEvent("", true))
		w.(http.Flusher).Flush()
		select { // silent past the client write timeout, then a clean close without [DONE]
		case <-time.After(1500 * time.Millisecond):
		case <-req.Context().Done():
		}
	}, func(o *Options) { o.ClientWriteTimeout = time.Second })
	got := r.post("/v1/chat/completions", chat("gpt-4o", true))
	if got.status != 200 || !strings.HasSuffix(got.body, "data: [DONE]\n\n") {
		t.Fatalf("%d %q", got.status, got.body)
	}
	waitServed(t, r.srv)
	if !strings.Contains(r.accessLog.String(), `"outcome":"success"`) {
		t.Fatalf("access log: %s", r.accessLog.String())
	}
}

// A stream that breaks after a silence longer than the client write timeout (within streamIdle)
// still ends with its in-band error for a client that reads all along, with stream recovery
// (which gives up here: no channel has prefill) and without it.
func TestStreamErrorAfterASilenceReachesTheClient(t *testing.T) {
	for _, policy := range []string{"", "streamRecovery: Error"} {
		t.Run(cmp.Or(policy, "recovery"), func(t *testing.T) {
			r := streamRigPolicy(t, policy, func(w http.ResponseWriter, req *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				_, _ = io.WriteString(w, chunkEvent("Hello", false))
				w.(http.Flusher).Flush()
				select { // silent past the client write timeout, then an error event
				case <-time.After(1500 * time.Millisecond):
				case <-req.Context().Done():
					return
				}
				_, _ = io.WriteString(w, `data: {"error":{"message":"overloaded","type":"server_error"}}`+"\n\n")
			}, func(o *Options) { o.ClientWriteTimeout = time.Second })
			got := r.post("/v1/chat/completions", chat("gpt-4o", true))
			if got.status != 200 || !strings.Contains(got.body, "stream_interrupted") {
				t.Fatalf("%d %q", got.status, got.body)
			}
		})
	}
}

// streamRigPolicy is streamRigOpts with policy in the chat policy's spec.
func streamRigPolicy(t *testing.T, policy string, h http.HandlerFunc, opt func(*Options)) *rig {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	r := newRigOpts(t, rigConfig{policy: policy}, opt)
	cfg := strings.Replace(rigConfig{policy: policy}.render(r.aURL, r.bURL), r.aURL+"/v1", up.URL+"/v1", 1)
	cfg = strings.ReplaceAll(cfg, "streamIdle: 300ms", "streamIdle: 10s")
	writeFile(t, r.dir, cfg)
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	return r
}

// The reproduction: six clients that pause reading at once, each for several times
// streamIdle, eject nothing and cause no continuation; each gets its whole answer.
func TestSixSlowReadersEjectNothing(t *testing.T) {
	sr := newSlowRig(t, "openai", "", "", nil)
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	errs := make(chan error, 6)
	for range 6 {
		c, _, resp := sr.slowClient("/v1/chat/completions", body)
		go func() {
			defer c.Close()
			head := make([]byte, 512)
			if _, err := io.ReadFull(resp.Body, head); err != nil {
				errs <- err
				return
			}
			time.Sleep(4 * slowRigStreamIdle) // a paused reader
			rest, err := io.ReadAll(resp.Body)
			if err == nil && !strings.Contains(string(rest), "data: [DONE]") {
				err = fmt.Errorf("the answer did not complete: ...%s", tail(string(rest), 200))
			}
			errs <- err
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	waitServed(t, sr.srv)
	if n := sr.mocks[1].Requests("m"); n != 0 {
		t.Errorf("%d requests (continuations or failovers) reached c1", n)
	}
	if p := sr.phase("c0", "m"); p != "Healthy" {
		t.Errorf("c0 is %s", p)
	}
}
