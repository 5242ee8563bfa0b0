package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
)

// channelFailure reads one provider's error answer for what the generic rules by status
// (health.OutcomeFromStatus and do's cases: 5xx fail over, 429 is a rate limit with Retry-After,
// 401/403/404 are channel failures whose text is withheld, other 4xx go back to the caller) would
// get wrong: a channel that cannot serve anyone (an account out of money). It fails over, counts
// against the channel, and the client is told reason (for the access log and the 503 message)
// instead of the provider's text. ok is false where the generic rules apply.
// The channels of bedrock and vertex are classified by their adapter's ClassifyError instead
// (adapters.go), which knows the cloud's error names.
type channelFailure func(status int, body []byte) (reason string, ok bool)

// providerErrors is the per-provider table (docs/providers.md shows it as a table too) of the
// OpenAI wire format; anthropic channels are judged by the Anthropic classifier instead
// (classifyAnthropicError).
var providerErrors = map[string]channelFailure{
	"openai":       openAIErrors,
	"azure-openai": openAIErrors,
}

// openAIErrors: a 429 whose code is insufficient_quota is an account out of money, not a rate
// limit: waiting does not help, another channel does.
func openAIErrors(status int, body []byte) (string, bool) {
	if status == http.StatusTooManyRequests && upstreamErrorCode(body) == "insufficient_quota" {
		return "the provider account is out of quota (insufficient_quota)", true
	}
	return "", false
}

// classifyAnthropicError reads a direct anthropic channel's error answer with the one parser and
// classifier of the Anthropic wire format (anthropic.ParseError, provider.ClassifyAnthropicError),
// which the vertex and bedrock adapters use too. ok is false for a body that is not an Anthropic
// error (a load balancer's page), which the generic rules by status judge; a 402 without one is
// a billing_error all the same.
func classifyAnthropicError(status int, body []byte) (f provider.Failure, ok bool) {
	e, ok := anthropic.ParseError(body)
	if !ok && status == http.StatusPaymentRequired {
		e, ok = anthropic.UpstreamError{Type: "billing_error"}, true
	}
	if !ok {
		return f, false
	}
	return provider.ClassifyAnthropicError(status, e), true
}

// classifyProviderError applies the channel's provider table to an error answer. When the table
// has a word for it, done is true and r is the attempt's result; otherwise the body is put back
// for do's generic cases.
func classifyProviderError(a *attempt, resp *http.Response) (r result, done bool) {
	if a.channel.Provider == "anthropic" {
		return anthropicResult(a, resp)
	}
	classify := providerErrors[a.channel.Provider]
	if classify == nil {
		return r, false
	}
	reason, ok := classify(resp.StatusCode, peekBody(resp))
	if !ok {
		return r, false
	}
	return result{status: resp.StatusCode, header: resp.Header, outcome: health.OutcomeServerError,
		detail: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, reason)}, true
}

// anthropicResult is a direct anthropic channel's error answer as the attempt's result, its
// outcome the classifier's. The caller's own errors go back with the provider's body (redacted,
// in the client's wire format); where the outcome is the one the status has anyway, do's case for
// the status writes the result (Retry-After, the withheld text of a credentials refusal); where
// they differ (a billing_error, a 504 timeout_error) the result is the classified failure's, as
// for an adapter's channel.
func anthropicResult(a *attempt, resp *http.Response) (r result, done bool) {
	b := peekBody(resp)
	f, ok := classifyAnthropicError(resp.StatusCode, b)
	switch {
	case !ok:
		return r, false
	case f.Outcome == health.OutcomeClientError:
		r = result{status: resp.StatusCode, header: resp.Header, outcome: f.Outcome, errCode: f.Code}
		if contextExceeded(f.ClientMessage) {
			r.errCode = "context_length_exceeded"
		}
		r.body = a.redact.bytes(b)
		if a.wire != nil && a.wire.errorBody != nil {
			r.body = a.wire.errorBody(resp.StatusCode, r.body)
		}
		r.detail = fmt.Sprintf("HTTP %d %s", resp.StatusCode, r.errCode)
		return r, true
	case f.Outcome == health.OutcomeFromStatus(resp.StatusCode):
		return r, false
	}
	if f.Outcome == health.OutcomeRateLimited {
		f.RetryAfter = provider.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return failureResult(a, &f, resp.StatusCode, resp.Header), true
}

// peekBody reads (a prefix of) an error answer's body and puts it back for whoever reads next.
func peekBody(resp *http.Response) []byte {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return b
}
