package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Connections that announce a body and send none, refused before the body is read (401 without
// a key, 404, 405), are closed by the server within the body-read deadline: they hold no
// goroutine or descriptor longer than a request with a key could, and they are counted.
func TestKeylessConnectionsAnnouncingABodyAreClosed(t *testing.T) {
	const deadline = 200 * time.Millisecond
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.BodyReadTimeout = deadline; o.RequireClientKey = true })
	base := runtime.NumGoroutine()
	requests := []struct {
		line string
		code int
	}{
		{"POST /v1/chat/completions", http.StatusUnauthorized},
		{"POST /v1/messages", http.StatusUnauthorized},
		{"POST /v1/no-such-path", http.StatusNotFound},
		{"PUT /v1/chat/completions", http.StatusMethodNotAllowed},
		{"POST /v1/models", http.StatusMethodNotAllowed},
	}
	const perKind = 20
	type open struct {
		c    net.Conn
		code int
	}
	var conns []open
	for _, rq := range requests {
		for range perKind {
			c := rawConn(t, r, rq.line+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
			conns = append(conns, open{c, rq.code})
		}
	}
	for i, o := range conns {
		resp := readStatus(t, o.c)
		if resp.StatusCode != o.code {
			t.Fatalf("connection %d: status %d, want %d", i, resp.StatusCode, o.code)
		}
		if !resp.Close {
			t.Errorf("connection %d (%d): the answer does not say Connection: close", i, o.code)
		}
		// The answer's body, then the server's close: well within 10 deadlines.
		_ = o.c.SetReadDeadline(time.Now().Add(10 * deadline))
		_, _ = io.Copy(io.Discard, resp.Body)
		if _, err := o.c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("connection %d (%d): not closed by the server within %s of the body deadline: %v", i, o.code, 10*deadline, err)
		}
	}
	// The server's connection goroutines are gone (bounded wait: they exit as the closes land).
	n := 0
	for range 100 {
		if n = runtime.NumGoroutine(); n <= base+5 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n > base+5 {
		t.Errorf("%d goroutines after the connections closed, %d before them", n, base)
	}
	m := r.metrics()
	for _, want := range []string{
		fmt.Sprintf(`switchyard_rejected_requests_total{reason="missing_api_key"} %d`, 2*perKind),
		fmt.Sprintf(`switchyard_rejected_requests_total{reason="unknown_url"} %d`, perKind),
		fmt.Sprintf(`switchyard_rejected_requests_total{reason="method_not_allowed"} %d`, 2*perKind),
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(m, "rejected"))
		}
	}
}
