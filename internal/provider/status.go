package provider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

// ClassifyStatus is what an error answer (any status from 300 on) means by its status alone:
// health.OutcomeFromStatus's class (the one classification of statuses, shared with replay and
// injected faults), with what each class reads of the body. It is every direct adapter's rule for
// the answers its wire format's classifier has no word for (a load balancer's page, an OpenAI
// error that is not a quota). body is (a prefix of) the answer's body, redacted by the caller:
// the caller's own mistakes and rate limits keep it for the client (Failure.Body).
func ClassifyStatus(status int, header http.Header, body []byte, now time.Time) Failure {
	f := Failure{Outcome: health.OutcomeFromStatus(status), Status: status}
	switch f.Outcome {
	case health.OutcomeRateLimited:
		f.RetryAfter = ParseRetryAfter(header.Get("Retry-After"), now)
		f.Body = body
		f.Detail = fmt.Sprintf("%d rate limited", status)
	case health.OutcomeMisconfigured:
		// The path is the provider's own API path and the model one the channel declares: a 404
		// or 405 here is a wrong baseURL or upstreamModel, or an API this provider does not
		// serve. The channel's fault, not the client's: fail over, and let the channel show it.
		f.Detail = fmt.Sprintf("HTTP %d (check the channel's baseURL and upstreamModel): %s", status, Summarize(string(body)))
	case health.OutcomeClientError:
		f.Code = ErrorCode(body)
		f.Body = body
		f.Detail = fmt.Sprintf("HTTP %d %s", status, f.Code)
	default:
		f.Detail = serverErrorDetail(status, body)
	}
	return f
}

// serverErrorDetail says why a status that is a server error (5xx, 401 and 403, 3xx) failed.
func serverErrorDetail(status int, body []byte) string {
	switch {
	case status >= 500:
		if len(body) > 4<<10 {
			body = body[:4<<10]
		}
		return fmt.Sprintf("HTTP %d: %s", status, Summarize(string(body)))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// The provider refused the gateway's own key (revoked, expired, wrong account): the
		// channel is broken, not the request. Fail over, and never hand the provider's message
		// (which quotes part of the key) to the client.
		return fmt.Sprintf("HTTP %d: the provider rejected the channel's credentials", status)
	}
	return fmt.Sprintf("unexpected HTTP %d from upstream", status)
}

// ErrorCode is error.code (or error.type) of an OpenAI-style error body ({"error":{"code"}}),
// "" for any other body: the code clients and the access log name a refusal by.
func ErrorCode(body []byte) string {
	var e struct {
		Error struct {
			Code any    `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	if s, ok := e.Error.Code.(string); ok && s != "" {
		return s
	}
	return e.Error.Type
}
