// Package openai is the wire adapter of the OpenAI API's channels: OpenAI itself, Azure OpenAI,
// and any OpenAI-compatible server (vLLM, a self-hosted model server). The body goes as it is to
// the channel's baseURL and the API path; only authentication and what an error means differ.
package openai

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
)

// Config is one channel's.
type Config struct {
	// BaseURL is the channel's baseURL; the API path (/chat/completions, ...) follows it.
	BaseURL string
	// APIKey is the channel's key; "" sends none (an in-cluster model server).
	APIKey string
	// Azure: the key goes in the api-key header, as Azure OpenAI takes it, not as a bearer token.
	Azure bool
}

// Adapter is the provider.Adapter of one OpenAI-API channel.
type Adapter struct{ cfg Config }

var _ provider.Adapter = (*Adapter)(nil)

// New returns the channel's adapter.
func New(cfg Config) *Adapter { return &Adapter{cfg: cfg} }

// NewRequest posts the body to BaseURL + Path with the channel's key.
func (a *Adapter) NewRequest(ctx context.Context, r provider.Request) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.BaseURL+r.Path, bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	switch {
	case a.cfg.APIKey == "":
	case a.cfg.Azure:
		req.Header.Set("Api-Key", a.cfg.APIKey)
	default:
		req.Header.Set("Authorization", "Bearer "+a.cfg.APIKey)
	}
	return req, nil
}

// ClassifyError reads the OpenAI API's error answers. One has a meaning its status does not
// tell: a 429 whose code is insufficient_quota is an account out of money, not a rate limit:
// waiting does not help, another channel does (a server error, counted against the channel).
// Every other answer is judged by its status (provider.ClassifyStatus).
func (a *Adapter) ClassifyError(status int, header http.Header, body []byte) provider.Failure {
	if code := provider.ErrorCode(body); status == http.StatusTooManyRequests && code == "insufficient_quota" {
		return provider.Failure{Outcome: health.OutcomeServerError, Status: status, Code: code,
			Detail: fmt.Sprintf("HTTP %d: the provider account is out of quota (insufficient_quota)", status)}
	}
	return provider.ClassifyStatus(status, header, body, time.Now())
}
