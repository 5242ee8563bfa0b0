package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
)

// errorClass is what a provider's error answer means for routing, where the generic rules by
// status (health.OutcomeFromStatus and do's cases: 5xx fail over, 429 is a rate limit with
// Retry-After, 401/403/404 are channel failures whose text is withheld, other 4xx go back to the
// caller) would get it wrong.
type errorClass struct {
	// channelFailure: the channel cannot serve anyone (an account out of money): fail over and
	// count it against the channel, and never show the provider's text to the client.
	channelFailure bool
	reason         string // for the access log and the 503 message, instead of the provider's text
	// code, for a caller's error: the OpenAI error code routing acts on (context_length_exceeded).
	code string
}

// errorClassifier reads one provider's error answer; ok is false where the generic rules apply.
// The channels of bedrock and vertex are classified by their adapter's ClassifyError instead
// (adapters.go), which knows the cloud's error names.
type errorClassifier func(status int, body []byte) (c errorClass, ok bool)

// providerErrors is the per-provider table (docs/providers.md shows it as a table too).
var providerErrors = map[string]errorClassifier{
	"openai":       openAIErrors,
	"azure-openai": openAIErrors,
	"anthropic":    anthropicErrors,
}

// openAIErrors: a 429 whose code is insufficient_quota is an account out of money, not a rate
// limit: waiting does not help, another channel does.
func openAIErrors(status int, body []byte) (errorClass, bool) {
	if status == http.StatusTooManyRequests && upstreamErrorCode(body) == "insufficient_quota" {
		return errorClass{channelFailure: true, reason: "the provider account is out of quota (insufficient_quota)"}, true
	}
	return errorClass{}, false
}

// anthropicErrors: billing_error (402) is an account out of money; a prompt over the context
// window is OpenAI's context_length_exceeded. overloaded_error (529) is a 5xx and rate_limit_error
// a 429 already; a 429 that is not a rate_limit_error is treated the same.
func anthropicErrors(status int, body []byte) (errorClass, bool) {
	e, ok := anthropic.ParseError(body)
	switch {
	case status == http.StatusPaymentRequired || (ok && e.Type == "billing_error"):
		return errorClass{channelFailure: true, reason: "the provider account cannot be billed (billing_error)"}, true
	case ok && status == http.StatusBadRequest && e.ContextExceeded():
		return errorClass{code: "context_length_exceeded"}, true
	}
	return errorClass{}, false
}

// classifyProviderError applies the channel's provider table to an error answer. When the table
// has a word for it, done is true and r is the attempt's result; otherwise the body is put back
// for do's generic cases.
func classifyProviderError(a *attempt, resp *http.Response) (r result, done bool) {
	classify := providerErrors[a.channel.Provider]
	if classify == nil {
		return r, false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body = io.NopCloser(bytes.NewReader(b))
	c, ok := classify(resp.StatusCode, b)
	if !ok {
		return r, false
	}
	r = result{status: resp.StatusCode, header: resp.Header}
	if c.channelFailure {
		r.outcome = health.OutcomeServerError
		r.detail = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, c.reason)
		return r, true
	}
	r.outcome = health.OutcomeClientError
	r.errCode = c.code
	r.body = a.redact.bytes(b)
	if a.wire != nil && a.wire.errorBody != nil {
		r.body = a.wire.errorBody(resp.StatusCode, r.body)
	}
	r.detail = fmt.Sprintf("HTTP %d %s", resp.StatusCode, c.code)
	return r, true
}
