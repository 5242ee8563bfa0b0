package mockprovider

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseBehavior(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Behavior
		err  bool
	}{
		{in: "ok", want: Behavior{Mode: ModeOK}},
		{in: " OK ", want: Behavior{Mode: "ok"}},
		{in: "fail_once", want: Behavior{Mode: ModeFailOnce}},
		{in: "fail_once;status=503", want: Behavior{Mode: ModeFailOnce, Status: 503}},
		{in: "ok;fail_first=2;code=502", want: Behavior{Mode: ModeOK, FailFirst: 2, Status: 502}},
		{in: "status;status=503", want: Behavior{Mode: ModeStatus, Status: 503}},
		{in: "503", want: Behavior{Mode: "503"}},
		{in: "rate_limit;retry_after=2", want: Behavior{Mode: ModeRateLimit, RetryAfter: 2}},
		{in: "429", want: Behavior{Mode: "429"}},
		{in: "reset", want: Behavior{Mode: ModeReset}},
		{in: "hang", want: Behavior{Mode: ModeHang}},
		{in: "slow_first_token;first_token_delay=150ms;headers_first", want: Behavior{Mode: ModeSlowFirstToken, FirstTokenDelay: 150 * time.Millisecond, HeadersFirst: true}},
		{in: "slow_first_token; first_token_delay = 200 ; headers_first=false", want: Behavior{Mode: ModeSlowFirstToken, FirstTokenDelay: 200 * time.Millisecond}},
		{in: "cut;after=2;chunks=5", want: Behavior{Mode: ModeCut, After: 2, Chunks: 5}},
		{in: "stall;after=1;chunk_delay=10ms", want: Behavior{Mode: ModeStall, After: 1, ChunkDelay: 10 * time.Millisecond}},
		{in: "garbage;after=1", want: Behavior{Mode: ModeGarbage, After: 1}},
		{in: "no_done;separate_usage", want: Behavior{Mode: ModeNoDone, SeparateUsage: true}},
		{in: "context_length_exceeded", want: Behavior{Mode: ModeContextLength}},
		{in: "content_policy_violation;message=nope", want: Behavior{Mode: ModeContentPolicy, Message: "nope"}},
		{in: "delay=50ms;latency=1s", want: Behavior{Delay: 50 * time.Millisecond, Latency: time.Second}},
		{in: "ok;", want: Behavior{Mode: ModeOK}},
		{in: "cut;prefill;break_first=1;raw_bytes;tool_call=lookup", want: Behavior{Mode: ModeCut, Prefill: true, BreakFirst: 1, RawBytes: true, ToolCall: "lookup"}},
		{in: "ok;tool_call", err: true},
		{in: "cut;break_first=x", err: true},
		{in: "", err: true},
		{in: "   ", err: true},
		{in: "explode", err: true},
		{in: "ok;nope=1", err: true},
		{in: "ok;delay=soon", err: true},
		{in: "ok;delay=-5ms", err: true},
		{in: "ok;delay", err: true},
		{in: "ok;chunks=x", err: true},
		{in: "ok;chunks=-1", err: true},
		{in: "ok;chunks=100000", err: true},
		{in: "status;status=200", err: true},
		{in: "status;status=700", err: true},
		{in: "99", err: true},
		{in: "ok;headers_first=maybe", err: true},
		{in: "ok;message", err: true},
		{in: "ok;delay=11m", err: true},
	} {
		got, err := ParseBehavior(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("ParseBehavior(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseBehavior(%q): %v", tc.in, err)
			continue
		}
		if got.normalized() != tc.want.normalized() {
			t.Errorf("ParseBehavior(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestNormalized(t *testing.T) {
	for _, tc := range []struct {
		in, want Behavior
	}{
		{Behavior{}, Behavior{Mode: ModeOK, Status: 500, Chunks: 3}},
		{Behavior{Mode: ModeFailOnce}, Behavior{Mode: ModeOK, Status: 500, Chunks: 3, FailFirst: 1}},
		{Behavior{Mode: ModeFailOnce, FailFirst: 3}, Behavior{Mode: ModeOK, Status: 500, Chunks: 3, FailFirst: 3}},
		{Behavior{Mode: ModeRateLimit}, Behavior{Mode: ModeRateLimit, Status: 429, Chunks: 3}},
		{Behavior{Mode: "429"}, Behavior{Mode: ModeRateLimit, Status: 429, Chunks: 3}},
		{Behavior{Mode: "503"}, Behavior{Mode: ModeStatus, Status: 503, Chunks: 3}},
		{Behavior{Mode: ModeSlowFirstToken}, Behavior{Mode: ModeSlowFirstToken, Status: 500, Chunks: 3, FirstTokenDelay: DefaultFirstTokenDelay}},
		{Behavior{Mode: ModeCut, After: 10, Chunks: 4}, Behavior{Mode: ModeCut, Status: 500, Chunks: 4, After: 4}},
	} {
		if got := tc.in.normalized(); got != tc.want {
			t.Errorf("%+v.normalized() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestBehaviorJSON(t *testing.T) {
	b := Behavior{Mode: ModeSlowFirstToken, FirstTokenDelay: 150 * time.Millisecond, HeadersFirst: true, RetryAfter: 2, Chunks: 4}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"mode":"slow_first_token","retry_after":2,"first_token_delay":"150ms","headers_first":true,"chunks":4}`; string(data) != want {
		t.Errorf("marshal: %s\nwant      %s", data, want)
	}
	var back Behavior
	if err := json.Unmarshal(data, &back); err != nil || back != b {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	b = Behavior{Mode: ModeCut, BreakFirst: 2, RawBytes: true, ToolCall: "lookup", Prefill: true}
	data, _ = json.Marshal(b)
	if want := `{"mode":"cut","prefill":true,"break_first":2,"raw_bytes":true,"tool_call":"lookup"}`; string(data) != want {
		t.Errorf("marshal: %s\nwant      %s", data, want)
	}
	if err := json.Unmarshal(data, &back); err != nil || back != b {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	// Durations may also be numbers of milliseconds.
	if err := json.Unmarshal([]byte(`{"mode":"ok","delay":50,"latency":"1s","chunk_delay":null}`), &back); err != nil {
		t.Fatal(err)
	}
	if back != (Behavior{Mode: ModeOK, Delay: 50 * time.Millisecond, Latency: time.Second}) {
		t.Errorf("ms durations: %+v", back)
	}
	if err := json.Unmarshal([]byte(`{"delay":"soon"}`), &back); err == nil {
		t.Error("bad duration accepted")
	}
}

func TestControlEndpoints(t *testing.T) {
	mock, ts, c := start(t, Options{Name: "ctl"})
	post := func(path, body string) (*http.Response, map[string]any) {
		t.Helper()
		resp, data := mustDo(t, c, ts, reqOpts{path: path, body: body})
		return resp, decode(t, data)
	}

	resp, _ := post("/_mock/behavior", `{"model":"gpt-4o","behavior":{"mode":"status","status":503,"retry_after":2}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("set behavior: %d", resp.StatusCode)
	}
	resp, _ = post("/_mock/behavior", `{"model":"","behavior":{"mode":"ok","delay":"1ms"}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("set default: %d", resp.StatusCode)
	}
	if b := mock.BehaviorFor("gpt-4o"); b.Mode != ModeStatus || b.Status != 503 || b.RetryAfter != 2 {
		t.Errorf("behavior set: %+v", b)
	}
	if b := mock.BehaviorFor("unknown"); b.Delay != time.Millisecond {
		t.Errorf("default set: %+v", b)
	}
	for _, bad := range []string{`{"model":"x","behavior":{"mode":"explode"}}`, `{"model":"x","behavior":{"delay":"soon"}}`, `not json`, `{"model":"x","extra":1}`} {
		if resp, _ := post("/_mock/behavior", bad); resp.StatusCode != 400 {
			t.Errorf("bad update %s: %d", bad, resp.StatusCode)
		}
	}

	r1, _ := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false), headers: map[string]string{"X-Probe": "1"}})
	r2, _ := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o-mini", true)})
	if r1.StatusCode != 503 || r1.Header.Get("Retry-After") != "2" || r2.StatusCode != 200 {
		t.Errorf("steered answers: %d %d", r1.StatusCode, r2.StatusCode)
	}

	resp, data := mustDo(t, c, ts, reqOpts{method: http.MethodGet, path: "/_mock/stats"})
	var st Stats
	if err := json.Unmarshal(data, &st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stats %d: %s", resp.StatusCode, data)
	}
	if st.Name != "ctl" || st.Total != 2 || st.Requests["gpt-4o"] != 1 || st.Requests["gpt-4o-mini"] != 1 || len(st.LastHeaders) == 0 {
		t.Errorf("stats %+v", st)
	}

	resp, data = mustDo(t, c, ts, reqOpts{method: http.MethodGet, path: "/_mock/behavior"})
	var cfg BehaviorConfig
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.PerModel["gpt-4o"].Status != 503 || cfg.Default.Delay != time.Millisecond {
		t.Errorf("behavior config %d: %s", resp.StatusCode, data)
	}

	// A null behaviour clears the model's own.
	post("/_mock/behavior", `{"model":"gpt-4o","behavior":null}`)
	if r, _ := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false)}); r.StatusCode != 200 {
		t.Errorf("after clear: %d", r.StatusCode)
	}

	if resp, _ := post("/_mock/reset", ``); resp.StatusCode != 200 {
		t.Errorf("reset: %d", resp.StatusCode)
	}
	if mock.Total() != 0 || mock.Requests("gpt-4o") != 0 {
		t.Errorf("after reset: %v", mock.Counts())
	}
	if mock.BehaviorFor("x").Delay != time.Millisecond {
		t.Error("plain reset should keep behaviours")
	}
	post("/_mock/behavior", `{"model":"m","behavior":{"mode":"hang"}}`)
	post("/_mock/reset?behaviors=1", ``)
	if mock.BehaviorFor("x") != (Behavior{}) || mock.BehaviorFor("m") != (Behavior{}) {
		t.Error("reset?behaviors=1 should clear behaviours")
	}

	// Control endpoints are not counted, work under a prefix, and reject bad methods and paths.
	if r, _ := mustDo(t, c, ts, reqOpts{method: http.MethodGet, path: "/openai/_mock/stats"}); r.StatusCode != 200 {
		t.Errorf("prefixed stats: %d", r.StatusCode)
	}
	if r, _ := mustDo(t, c, ts, reqOpts{method: http.MethodGet, path: "/_mock/reset"}); r.StatusCode != 405 {
		t.Errorf("GET reset: %d", r.StatusCode)
	}
	if r, _ := mustDo(t, c, ts, reqOpts{method: http.MethodGet, path: "/_mock/nope"}); r.StatusCode != 404 {
		t.Errorf("unknown control: %d", r.StatusCode)
	}
	if mock.Total() != 0 {
		t.Errorf("control requests were counted: %d", mock.Total())
	}
}

func TestInvalidConfiguredBehavior(t *testing.T) {
	mock, ts, c := start(t, Options{})
	mock.SetBehavior("gpt-4o", Behavior{Mode: "explode"})
	resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false)})
	if resp.StatusCode != 500 || !strings.Contains(openAIError(t, data)["message"].(string), "mockprovider") {
		t.Errorf("invalid behaviour: %d %s", resp.StatusCode, data)
	}
}

// TestCloseReleasesEverything puts requests in every blocking state, closes
// the mock and the httptest server, and checks no goroutine is left.
func TestCloseReleasesEverything(t *testing.T) {
	before := runtime.NumGoroutine()

	mock := New(Options{})
	ts := httptest.NewServer(mock)
	tr := &http.Transport{}
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	mock.SetBehavior("hang", Behavior{Mode: ModeHang})
	mock.SetBehavior("stall", Behavior{Mode: ModeStall, After: 1})
	mock.SetBehavior("stall0", Behavior{Mode: ModeStall, HeadersFirst: true})
	mock.SetBehavior("slow", Behavior{Mode: ModeSlowFirstToken, FirstTokenDelay: time.Minute, HeadersFirst: true})
	mock.SetBehavior("delay", Behavior{Delay: time.Minute})
	mock.SetBehavior("latency", Behavior{Latency: time.Minute})
	mock.SetBehavior("chunky", Behavior{ChunkDelay: time.Minute})
	type call struct {
		model  string
		stream bool
	}
	calls := []call{
		{"hang", false}, {"hang", true}, {"stall", false}, {"stall", true}, {"stall0", true},
		{"slow", true}, {"delay", false}, {"delay", true}, {"latency", false}, {"chunky", true},
	}

	done := make(chan error, len(calls))
	for _, cl := range calls {
		go func() {
			resp, err := do(t, c, ts, reqOpts{body: chatBody(cl.model, cl.stream)})
			if err == nil {
				_, err = readSSE(resp.Body)
				resp.Body.Close()
				if err == nil {
					err = errors.New("complete answer from " + cl.model)
				}
			}
			done <- err
		}()
	}
	waitFor(t, func() bool { return mock.Total() == len(calls) })
	time.Sleep(20 * time.Millisecond) // let the handlers reach their waits

	mock.Close()
	closed := make(chan struct{})
	go func() { ts.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		t.Fatal("httptest.Server.Close blocked after mock.Close")
	}
	for range calls {
		select {
		case err := <-done:
			if err != nil && strings.HasPrefix(err.Error(), "complete answer") {
				t.Error(err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("a client was not released")
		}
	}
	tr.CloseIdleConnections()

	deadline := time.Now().Add(3 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}

	// After Close the mock still answers normally; hang is cut at once.
	ts2 := httptest.NewServer(mock)
	defer ts2.Close()
	defer tr.CloseIdleConnections()
	if r, _ := mustDo(t, c, ts2, reqOpts{body: chatBody("gpt-4o", true)}); r.StatusCode != 200 {
		t.Errorf("after close: %d", r.StatusCode)
	}
	t0 := time.Now()
	if resp, err := do(t, c, ts2, reqOpts{body: chatBody("hang", false)}); err == nil {
		resp.Body.Close()
		t.Error("hang after close answered")
	}
	if time.Since(t0) > time.Second {
		t.Error("hang after close was not cut at once")
	}
}

func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mock := New(Options{Name: "proc"})
	mock.SetBehavior("hang", Behavior{Mode: ModeHang})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, ln, mock) }()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	url := "http://" + ln.Addr().String()
	resp, err := c.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(NameHeader) != "proc" {
		t.Errorf("status %d", resp.StatusCode)
	}

	// A hung request does not hold the shutdown.
	hung := make(chan error, 1)
	go func() {
		resp, err := c.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"hang"}`))
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	waitFor(t, func() bool { return mock.Requests("hang") == 1 })
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	select {
	case err := <-hung:
		if err == nil {
			t.Error("hung request answered")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("hung request not released")
	}
}

func TestListenAndServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ListenAndServe(ctx, "127.0.0.1:0", New(Options{})) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("ListenAndServe: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ListenAndServe did not return")
	}
	if err := ListenAndServe(context.Background(), "127.0.0.1:-1", New(Options{})); err == nil {
		t.Error("bad address accepted")
	}
}

// TestBehaviorHelp: the --help list names every mode and every field of a Behavior, and its
// examples parse.
func TestBehaviorHelp(t *testing.T) {
	help := BehaviorHelp()
	for m := range knownModes {
		if !strings.Contains(help, string(m)) {
			t.Errorf("the help lacks mode %q", m)
		}
	}
	_, params, _ := strings.Cut(help, "params:")
	params, _, _ = strings.Cut(params, "e.g.")
	listed := map[string]bool{}
	for _, p := range strings.FieldsFunc(params, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		listed[p] = true
	}
	ty := reflect.TypeOf(behaviorJSON{})
	for i := 0; i < ty.NumField(); i++ {
		name, _, _ := strings.Cut(ty.Field(i).Tag.Get("json"), ",")
		if name != "mode" && !listed[name] {
			t.Errorf("the help lacks param %q", name)
		}
		delete(listed, name)
	}
	for p := range listed {
		t.Errorf("the help lists %q, which is no field of a Behavior", p)
	}
	for _, ex := range behaviorExamples {
		if _, err := ParseBehavior(ex); err != nil {
			t.Errorf("example %q: %v", ex, err)
		}
	}
}
