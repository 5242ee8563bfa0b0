package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// /healthz and /readyz answer on the API port too, without a key even where keys are required,
// and a proxy that is not ready says only that (the reason is the admin port's).
func TestProbesOnTheAPIPort(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	get := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, r.api.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(http.MethodGet, "/v1/models"); code != http.StatusUnauthorized {
		t.Fatalf("/v1/models without a key: %d %s, want 401 (keys are required)", code, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(http.MethodGet, path); code != 200 || body != "ok\n" {
			t.Errorf("GET %s without a key: %d %q, want 200 ok", path, code, body)
		}
		if code, _ := get(http.MethodHead, path); code != 200 {
			t.Errorf("HEAD %s: %d, want 200", path, code)
		}
		if code, _ := get(http.MethodPost, path); code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d, want 405", path, code)
		}
	}
	r.srv.Drain()
	code, body := get(http.MethodGet, "/readyz")
	if code != http.StatusServiceUnavailable || body != "not ready\n" {
		t.Errorf("/readyz while draining: %d %q, want 503 \"not ready\" and no reason", code, body)
	}
	if code, body := get(http.MethodGet, "/healthz"); code != 200 {
		t.Errorf("/healthz while draining: %d %q, want 200 (alive, only not ready)", code, body)
	}
	resp, err := http.Get(r.admin.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "draining") {
		t.Errorf("admin /readyz while draining: %d %q, want 503 naming draining", resp.StatusCode, b)
	}
}
