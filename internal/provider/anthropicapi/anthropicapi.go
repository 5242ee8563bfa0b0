// Package anthropicapi is the wire adapter of direct anthropic channels: Anthropic's Messages API
// (/messages, /messages/count_tokens) at the channel's baseURL, with its key in x-api-key and the
// anthropic-version and anthropic-beta headers. Its answers and streams are the Messages API's
// own; its errors are read by the one classifier of the Anthropic wire format, which Claude on
// Vertex and on Bedrock share (provider.ClassifyAnthropicError).
package anthropicapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
)

// Config is one channel's.
type Config struct {
	// BaseURL is the channel's baseURL; the API path (/messages, ...) follows it.
	BaseURL string
	// APIKey is the channel's key; "" sends none.
	APIKey string
}

// Adapter is the provider.Adapter of one anthropic channel.
type Adapter struct{ cfg Config }

var _ provider.Adapter = (*Adapter)(nil)

// New returns the channel's adapter.
func New(cfg Config) *Adapter { return &Adapter{cfg: cfg} }

// NewRequest posts the Messages body to BaseURL + Path with the channel's key, the client's
// anthropic-version (the default when it sent none) and its betas.
func (a *Adapter) NewRequest(ctx context.Context, r provider.Request) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.BaseURL+r.Path, bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	v := r.Version
	if v == "" {
		v = anthropic.DefaultVersion
	}
	h.Set("Anthropic-Version", v)
	if len(r.Beta) > 0 {
		h.Set("Anthropic-Beta", strings.Join(r.Beta, ","))
	}
	if a.cfg.APIKey != "" {
		h.Set("X-Api-Key", a.cfg.APIKey)
	}
	return req, nil
}

// ClassifyError reads an error answer with the one parser and classifier of the Anthropic wire
// format. A body that is not an Anthropic error (a load balancer's page) is judged by its status;
// a 402 without one is a billing_error all the same. The caller's own mistakes keep the body for
// the client; where the classifier's outcome is the one the status has anyway, the status's rule
// writes the failure (the Retry-After, the withheld text of a credentials refusal); where they
// differ (a billing_error, a 504 timeout_error) it is the classifier's.
func (a *Adapter) ClassifyError(status int, header http.Header, body []byte) provider.Failure {
	now := time.Now()
	e, ok := anthropic.ParseError(body)
	if !ok && status == http.StatusPaymentRequired {
		e, ok = anthropic.UpstreamError{Type: "billing_error"}, true
	}
	if !ok {
		return provider.ClassifyStatus(status, header, body, now)
	}
	f := provider.ClassifyAnthropicError(status, e)
	switch {
	case f.Outcome == health.OutcomeClientError:
		// The caller's own mistake: its body goes back to it, and the access log names the
		// error by its type alone, as for an OpenAI channel (a validation message may quote the
		// request).
		f.Body = body
		f.Detail = fmt.Sprintf("HTTP %d %s", status, f.Code)
	case f.Outcome == health.OutcomeFromStatus(status):
		return provider.ClassifyStatus(status, header, body, now)
	case f.Outcome == health.OutcomeRateLimited:
		f.RetryAfter = provider.ParseRetryAfter(header.Get("Retry-After"), now)
	}
	return f
}
