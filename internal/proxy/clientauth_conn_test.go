package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Connections that announce a body and send none, refused before the body is read (401 without
// a key, 404, 405), are closed by the server within the body-read deadline: they hold no
// goroutine or descriptor longer than a request with a key could, and they are counted.
func TestKeylessConnectionsAnnouncingABodyAreClosed(t *testing.T) {
	const deadline = 200 * time.Millisecond
	r := newRigOpts(t, rigConfig{}, func(o *Options) {
		// Not throttled here: which of the keyless requests would get 429 instead of 401 is a race.
		o.BodyReadTimeout, o.RequireClientKey, o.AuthFailuresPerSecond = deadline, true, -1
	})
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
		{"GET /v1/models", http.StatusUnauthorized},
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
		fmt.Sprintf(`switchyard_rejected_requests_total{reason="missing_api_key"} %d`, 3*perKind),
		fmt.Sprintf(`switchyard_rejected_requests_total{reason="unknown_url"} %d`, perKind),
		fmt.Sprintf(`switchyard_rejected_requests_total{reason="method_not_allowed"} %d`, 2*perKind),
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(m, "rejected"))
		}
	}
}

// getModels is GET /v1/models with headers, and the ids it lists.
func (r *rig) getModels(headers ...string) (int, string, []string) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.api.URL+"/v1/models", nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	var ids []string
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &list); err != nil {
			r.t.Fatalf("models list %s: %v", b, err)
		}
		for _, m := range list.Data {
			ids = append(ids, m.ID)
		}
	}
	return resp.StatusCode, string(b), ids
}

// With keys required, /v1/models needs a key like the API and lists only what that client may
// call; open, it lists every served model.
func TestModelsNeedAKeyAndListTheClientsModels(t *testing.T) {
	r := newRig(t, rigConfig{})
	if code, body, ids := r.getModels(); code != 200 || !slices.Equal(ids, []string{"gpt-4.1", "gpt-4o", "gpt-4o-mini"}) {
		t.Fatalf("open proxy: %d %s", code, body)
	}
	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	for _, tc := range []struct {
		name    string
		headers []string
		code    int
		errCode string
	}{
		{"no key", nil, 401, "missing_api_key"},
		{"unknown key", []string{"Authorization", "Bearer sk-not-a-client-0f3b9c1e7a5d2b8f6e4c"}, 401, "invalid_api_key"},
		{"disabled client", []string{"Authorization", "Bearer " + clientKeyOff}, 403, "client_disabled"},
	} {
		if code, body, _ := r.getModels(tc.headers...); code != tc.code || errorCode(t, body) != tc.errCode {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, body, tc.code, tc.errCode)
		}
	}
	// Team may use gpt-4o*: gpt-4.1 is routed, but not for it.
	if code, body, ids := r.getModels("Authorization", "Bearer "+clientKeyOne); code != 200 || !slices.Equal(ids, []string{"gpt-4o", "gpt-4o-mini"}) {
		t.Fatalf("team's list: %d %s, want gpt-4o and gpt-4o-mini only", code, body)
	}
}
