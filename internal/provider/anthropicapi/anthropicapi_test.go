package anthropicapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
)

// TestRequestHeaders: the key in x-api-key, the client's anthropic-version (the default when it
// sent none), its betas in one header.
func TestRequestHeaders(t *testing.T) {
	a := New(Config{BaseURL: "http://127.0.0.1:1/v1", APIKey: "sk-ant-test"})
	req, err := a.NewRequest(context.Background(), provider.Request{Path: "/messages/count_tokens", Body: []byte(`{}`),
		Version: "2023-01-01", Beta: []string{"a-1", "b-2"}})
	if err != nil {
		t.Fatal(err)
	}
	if req.URL.String() != "http://127.0.0.1:1/v1/messages/count_tokens" || req.Header.Get("X-Api-Key") != "sk-ant-test" ||
		req.Header.Get("Anthropic-Version") != "2023-01-01" || req.Header.Get("Anthropic-Beta") != "a-1,b-2" || req.Header.Get("Authorization") != "" {
		t.Errorf("%s %v", req.URL, req.Header)
	}
	req, _ = New(Config{BaseURL: "http://127.0.0.1:1/v1"}).NewRequest(context.Background(), provider.Request{Path: "/messages", Body: []byte(`{}`)})
	if req.Header.Get("Anthropic-Version") != anthropic.DefaultVersion || req.Header.Get("X-Api-Key") != "" || req.Header.Get("Anthropic-Beta") != "" {
		t.Errorf("no key, no version, no betas: %v", req.Header)
	}
}

// TestRetryAfterOnAClassifiedRateLimit: a rate_limit_error answered with another status than
// 429 is still a rate limit, with the Retry-After it carries.
func TestRetryAfterOnAClassifiedRateLimit(t *testing.T) {
	f := New(Config{}).ClassifyError(503, http.Header{"Retry-After": {"12"}}, []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`))
	if f.Outcome != health.OutcomeRateLimited || f.RetryAfter.Seconds() != 12 {
		t.Errorf("%+v", f)
	}
}
