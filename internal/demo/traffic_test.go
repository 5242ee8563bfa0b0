package demo

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestReadStream(t *testing.T) {
	chunk := `data: {"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n"
	fin := `data: {"choices":[{"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	for name, tc := range map[string]struct{ body, want string }{
		"complete":             {chunk + fin + "data: [DONE]\n\n", "ok"},
		"no done":              {chunk + fin, "stream_incomplete"},
		"cut":                  {chunk, "stream_incomplete"},
		"in-band error":        {chunk + `data: {"error":{"message":"interrupted","code":"stream_interrupted"}}` + "\n\n", "stream_error"},
		"error before done":    {chunk + `data: {"error":{"message":"x"}}` + "\n\ndata: [DONE]\n\n", "stream_error"},
		"null error is fine":   {`data: {"error":null,"choices":[]}` + "\n\ndata: [DONE]\n\n", "ok"},
		"comments and garbage": {": keep-alive\n\ndata: {not json\n\n" + chunk + "data: [DONE]\n\n", "ok"},
	} {
		if got := readStream(strings.NewReader(tc.body)); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

func TestLatencyQuantilesAndRate(t *testing.T) {
	var rs []outcome
	for i := 1; i <= 100; i++ {
		rs = append(rs, outcome{At: at(float64(i) / 10), Latency: time.Duration(i) * time.Millisecond})
	}
	q := latencyQuantiles(rs, 0.5, 0.95, 1)
	if q[0] != 50*time.Millisecond || q[1] != 95*time.Millisecond || q[2] != 100*time.Millisecond {
		t.Errorf("quantiles = %v", q)
	}
	if q := latencyQuantiles(nil, 0.5); q[0] != 0 {
		t.Errorf("empty = %v", q)
	}
	// 10 requests per second; the last 5 s of [0.1s, 10s] hold 50 of them.
	if r := rateSince(rs, at(10), 5*time.Second); r != 10 {
		t.Errorf("rate = %v", r)
	}
}

// TestGenerator runs the generator against a fake gateway: it keeps to its rate, mixes models
// and streaming, and counts errors and failovers from what it saw.
func TestGenerator(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		stream := strings.Contains(readAll(r), `"stream":true`)
		w.Header().Set("X-Switchyard-Channel", "provider-b")
		w.Header().Set("X-Switchyard-Attempts", "1")
		if i%10 == 0 {
			w.Header().Set("X-Switchyard-Attempts", "2")
		}
		switch {
		case i%25 == 0:
			http.Error(w, `{"error":{"message":"no channel"}}`, http.StatusServiceUnavailable)
		case stream:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"choices":[{"delta":{},"finish_reason":"stop"}]}`+"\n\n")
			if i%7 != 0 {
				fmt.Fprint(w, "data: [DONE]\n\n")
			}
		default:
			fmt.Fprint(w, `{"choices":[{"message":{"content":"hi"}}]}`)
		}
	}))
	defer srv.Close()
	g := newGenerator(srv.URL, []string{"gpt-4o", "gpt-4o-mini"}, 50, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	g.run(ctx)
	res := g.snapshot()
	if len(res) < 30 || len(res) > 70 {
		t.Fatalf("%d requests in 1.2s at 50/s", len(res))
	}
	c := countClients(res, []string{"gpt-4o", "gpt-4o-mini"})
	all := c[2]
	if all.Sent != len(res) || c[0].Sent+c[1].Sent != all.Sent || c[0].Sent == 0 || c[1].Sent == 0 {
		t.Errorf("counts = %+v", c)
	}
	if all.Streams == 0 || all.Streams == all.Sent {
		t.Errorf("streams %d of %d: want a mix", all.Streams, all.Sent)
	}
	if all.Errors == 0 || all.ErrorKinds["http_503"] == 0 || all.FailedOver == 0 || all.OK+all.Errors != all.Sent {
		t.Errorf("errors = %+v", all)
	}
	for k := range all.ErrorKinds {
		if k != "http_503" && k != "stream_incomplete" {
			t.Errorf("unexpected error kind %q", k)
		}
	}
}

func readAll(r *http.Request) string {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}
