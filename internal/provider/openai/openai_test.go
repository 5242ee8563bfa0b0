package openai

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
)

// TestRequestCarriesTheChannelsKey: the body goes as it is to baseURL + path, the key as a bearer
// token, as Azure's api-key, or not at all.
func TestRequestCarriesTheChannelsKey(t *testing.T) {
	for _, c := range []struct {
		cfg          Config
		auth, apiKey string
	}{
		{Config{BaseURL: "http://127.0.0.1:1/v1", APIKey: "sk-test"}, "Bearer sk-test", ""},
		{Config{BaseURL: "http://127.0.0.1:1/v1", APIKey: "az-test", Azure: true}, "", "az-test"},
		{Config{BaseURL: "http://127.0.0.1:1/v1"}, "", ""},
	} {
		req, err := New(c.cfg).NewRequest(context.Background(), provider.Request{Path: "/embeddings", Body: []byte(`{"model":"m"}`)})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(req.Body)
		if req.Method != http.MethodPost || req.URL.String() != "http://127.0.0.1:1/v1/embeddings" || string(body) != `{"model":"m"}` ||
			req.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%+v: %s %s %s", c.cfg, req.Method, req.URL, body)
		}
		if req.Header.Get("Authorization") != c.auth || req.Header.Get("Api-Key") != c.apiKey {
			t.Errorf("%+v: Authorization %q api-key %q, want %q %q", c.cfg, req.Header.Get("Authorization"), req.Header.Get("Api-Key"), c.auth, c.apiKey)
		}
	}
}

// TestQuotaIsTheChannels: insufficient_quota is an account out of money (a server error);
// any other 429 is a rate limit with its Retry-After, by status.
func TestQuotaIsTheChannels(t *testing.T) {
	a := New(Config{})
	f := a.ClassifyError(429, http.Header{"Retry-After": {"7"}}, []byte(`{"error":{"code":"insufficient_quota","message":"quota"}}`))
	if f.Outcome != health.OutcomeServerError || f.Code != "insufficient_quota" || f.RetryAfter != 0 {
		t.Errorf("insufficient_quota: %+v", f)
	}
	f = a.ClassifyError(429, http.Header{"Retry-After": {"7"}}, []byte(`{"error":{"code":"rate_limit_exceeded"}}`))
	if f.Outcome != health.OutcomeRateLimited || f.RetryAfter.Seconds() != 7 || f.Body == nil {
		t.Errorf("rate_limit_exceeded: %+v", f)
	}
	f = a.ClassifyError(400, http.Header{}, []byte(`{"error":{"code":"context_length_exceeded"}}`))
	if f.Outcome != health.OutcomeClientError || f.Code != "context_length_exceeded" || f.Body == nil {
		t.Errorf("a caller's mistake: %+v", f)
	}
}
