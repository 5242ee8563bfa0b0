package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// chunkEvent is one chat.completion.chunk event with the given content.
func chunkEvent(content string, finish bool) string {
	fr := "null"
	if finish {
		fr = `"stop"`
	}
	return fmt.Sprintf("data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":%s}]}\n\n", content, fr)
}

// streamRig points channel A of a rig at an upstream handler.
func streamRig(t *testing.T, h http.HandlerFunc) *rig { t.Helper(); return streamRigOpts(t, h, nil) }

// An event followed by part of the next one must reach the client at once: events are only held
// back (to go out in one write) while a complete event is already waiting behind them.
func TestStreamEventIsNotHeldBehindAPartialOne(t *testing.T) {
	release := make(chan struct{})
	r := streamRig(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, chunkEvent("first", false)+`data: {"object":"chat.comp`)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(5 * time.Second):
			return
		}
		_, _ = io.WriteString(w, "letion.chunk\",\"choices\":[]}\n\n"+chunkEvent("", true)+"data: [DONE]\n\n")
	})
	lines := make(chan string, 16)
	go func() { // the request itself waits for the headers, which go out with the first event
		defer close(lines)
		resp, err := http.Post(r.api.URL+"/v1/chat/completions", "application/json", strings.NewReader(chat("gpt-4o", true)))
		if err != nil {
			lines <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for i := 0; i < 16; i++ {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lines <- l
		}
	}()
	select {
	case l := <-lines:
		if !strings.Contains(l, `"first"`) {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the first event did not reach the client while the next one was incomplete")
	}
	close(release)
	var rest strings.Builder
	for l := range lines {
		rest.WriteString(l)
	}
	if !strings.HasSuffix(rest.String(), "data: [DONE]\n\n") || !strings.Contains(rest.String(), `"finish_reason":"stop"`) {
		t.Errorf("rest of the stream:\n%s", rest.String())
	}
}

// A burst of events written at once arrives whole and in order.
func TestStreamBurstArrivesWholeAndInOrder(t *testing.T) {
	var burst strings.Builder
	for i := 0; i < 200; i++ {
		burst.WriteString(chunkEvent(fmt.Sprintf("tok%03d", i), false))
	}
	burst.WriteString(chunkEvent("", true) + "data: [DONE]\n\n")
	r := streamRig(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, burst.String())
	})
	got := r.post("/v1/chat/completions", chat("gpt-4o", true))
	if got.status != 200 || got.body != burst.String() {
		t.Fatalf("status %d, body differs from the upstream's (%d vs %d bytes)", got.status, len(got.body), burst.Len())
	}
}

// A non-streamed answer goes out with its length, not chunked, whatever its size.
func TestLargeAnswerKeepsItsLength(t *testing.T) {
	body := fmt.Sprintf(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, strings.Repeat("x", 20<<10))
	r := streamRig(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body) // net/http itself sends this chunked
	})
	resp, err := http.Post(r.api.URL+"/v1/chat/completions", "application/json", strings.NewReader(chat("gpt-4o", false)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != body {
		t.Fatalf("body differs (%d bytes, %v)", len(got), err)
	}
	if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
		t.Errorf("Content-Length %d, Transfer-Encoding %q; want %d and none", resp.ContentLength, resp.TransferEncoding, len(body))
	}
}

// Hop-by-hop headers stay between the client and the gateway: Expect (curl sends
// "Expect: 100-continue" with bodies over 1 KiB; the gateway has read the body already) and the
// headers the client's Connection header names.
func TestHopByHopHeadersAreNotForwarded(t *testing.T) {
	r := newRig(t, rigConfig{})
	body := fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":%q}]}`, strings.Repeat("y", 4<<10))
	got := r.post("/v1/chat/completions", body, "Expect", "100-continue", "Connection", "keep-alive, X-Hop, Traceparent", "X-Hop", "1",
		"Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "Tracestate", "t=1")
	if got.status != 200 {
		t.Fatalf("status %d: %s", got.status, got.body)
	}
	h := r.A.LastHeaders()
	for _, name := range []string{"Expect", "X-Hop", "Connection", "Traceparent"} {
		if v := h.Get(name); v != "" {
			t.Errorf("upstream got %s: %q", name, v)
		}
	}
	if h.Get("Tracestate") != "t=1" {
		t.Errorf("a forwarded end-to-end header was dropped: %v", h)
	}
}

// A baseURL with credentials is refused (they belong in a Secret): the password appears in no
// error, log line or admin answer, and the channel's last good form keeps serving.
func TestBaseURLCredentialsAreRefusedWithoutEchoingThem(t *testing.T) {
	r := newRig(t, rigConfig{})
	base := strings.Replace(r.aURL, "http://", "http://vllm-user:s3cret-pw@", 1)
	cfg := strings.Replace(rigConfig{}.render(r.aURL, r.bURL), r.aURL+"/v1", base+"/v1", 1)
	writeFile(t, r.dir, cfg)
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	cfgErr := r.configError()
	if !strings.Contains(cfgErr, "ProviderChannel chan-a (its last good form serves): spec.baseURL") {
		t.Fatalf("a baseURL with credentials loaded, or the error does not name the field: %q", cfgErr)
	}
	resp, gerr := http.Get(r.admin.URL + "/admin/v1/channels")
	if gerr != nil {
		t.Fatal(gerr)
	}
	admin, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for what, text := range map[string]string{"error": cfgErr, "admin API": string(admin), "log": r.logs.String()} {
		if strings.Contains(text, "s3cret-pw") || strings.Contains(text, "vllm-user") {
			t.Errorf("the %s carries the baseURL's credentials: %s", what, text)
		}
	}
	if rep := r.post("/v1/chat/completions", chat("gpt-4o", false)); rep.status != 200 {
		t.Errorf("the last good config stopped serving: %d %s", rep.status, rep.body)
	}
}

// Blank lines after an event (some servers pad, or send bare-newline heartbeats) are no event:
// the one before them is flushed at once.
func TestStreamEventIsNotHeldBehindBlankLines(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	r := streamRig(t, func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, chunkEvent("first", false)+"\n\n\r\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(5 * time.Second):
			return
		}
		_, _ = io.WriteString(w, chunkEvent("", true)+"data: [DONE]\n\n")
	})
	first := make(chan string, 1)
	go func() {
		resp, err := http.Post(r.api.URL+"/v1/chat/completions", "application/json", strings.NewReader(chat("gpt-4o", true)))
		if err != nil {
			first <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		l, _ := bufio.NewReader(resp.Body).ReadString('\n')
		first <- l
	}()
	select {
	case l := <-first:
		if !strings.Contains(l, `"first"`) {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the event followed by blank lines was held back")
	}
}

func TestUpstreamConnectionGauges(t *testing.T) {
	r := newRig(t, rigConfig{})
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 {
		t.Fatalf("status %d", got.status)
	}
	resp, err := http.Get(r.admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"switchyard_upstream_connections_open 1\n", "switchyard_upstream_connections_idle 1\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
