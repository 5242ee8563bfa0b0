package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
)

// EditBody returns the JSON object body with the top-level fields in set put in (replacing any
// already there) and those in drop removed. Every other field passes through as it came, nested
// values byte for byte: a gateway must not lose what it does not know.
func EditBody(body []byte, set map[string]any, drop ...string) ([]byte, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("the request body is not a JSON object: %w", err)
	}
	if obj == nil {
		return nil, errors.New("the request body is not a JSON object: null")
	}
	if dec.More() {
		return nil, errors.New("the request body has data after its JSON object")
	}
	for _, k := range drop {
		delete(obj, k)
	}
	for k, v := range set {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", k, err)
		}
		obj[k] = b
	}
	return json.Marshal(obj)
}

// eventType reads the "type" of an Anthropic event's JSON, "" if it has none.
func eventType(data []byte) string {
	var t struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &t) != nil {
		return ""
	}
	return t.Type
}

// ClassifyAnthropicError is what an Anthropic error means, answered with status (0 for an error
// event in a stream) and read by anthropic.ParseError. It is the one classifier of the Anthropic
// wire format: direct anthropic channels (the proxy), Claude on Vertex (its answers and stream)
// and on Bedrock (error events inside its stream) are all judged by it. Only the caller's own
// mistakes keep the provider's message for the client.
//
//	overloaded_error (529), api_error (500)        server error: fail over
//	rate_limit_error (429)                         rate limited
//	authentication_error, permission_error         the channel's credentials: a server error, text withheld
//	billing_error (402)                            the gateway's account is out of credit: a server error
//	                                               (fail over to a channel another account pays), text withheld
//	not_found_error (404)                          misconfigured (model id or location)
//	timeout_error (504)                            timeout
//	invalid_request_error, request_too_large       the caller's: client error, message kept
//	any other type                                 by status (health.OutcomeFromStatus), a server error in a stream
func ClassifyAnthropicError(status int, e anthropic.UpstreamError) Failure {
	f := Failure{Status: status, Code: e.Type}
	withheld := ""
	switch e.Type {
	case "overloaded_error", "api_error":
		f.Outcome = health.OutcomeServerError
	case "rate_limit_error":
		f.Outcome = health.OutcomeRateLimited
	case "authentication_error", "permission_error":
		f.Outcome = health.OutcomeServerError
		withheld = "the provider rejected the channel's credentials"
	case "billing_error":
		f.Outcome = health.OutcomeServerError
		withheld = "the provider account cannot be billed"
	case "not_found_error":
		f.Outcome = health.OutcomeMisconfigured
	case "timeout_error":
		f.Outcome = health.OutcomeTimeout
	case "invalid_request_error", "request_too_large":
		f.Outcome = health.OutcomeClientError
	default:
		f.Outcome = health.OutcomeServerError
		if status != 0 {
			f.Outcome = health.OutcomeFromStatus(status)
		}
	}
	if withheld != "" {
		f.Detail = fmt.Sprintf("%s (%s)", withheld, e.Type)
	} else {
		f.Detail = fmt.Sprintf("%s: %s", e.Type, Summarize(e.Message))
	}
	if status != 0 {
		f.Detail = fmt.Sprintf("HTTP %d %s", status, f.Detail)
	}
	f.ClientType = ClientTypeFor(f.Outcome)
	f.ClientMessage = GenericMessage(f.Outcome)
	if f.Outcome == health.OutcomeClientError {
		f.ClientType, f.ClientMessage = e.Type, e.Message
	}
	return f
}

// Summarize shortens a provider's error message, or an error body, for Detail and the access
// log: the body's error.message when it is a JSON error ({"error":{"message"}}), on one line,
// trimmed, at most 200 bytes (cut at a character, "…" after a cut). It is the one summary of
// provider text: the proxy's direct channels and the adapters use it.
func Summarize(s string) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if strings.HasPrefix(strings.TrimSpace(s), "{") && json.Unmarshal([]byte(s), &e) == nil && e.Error.Message != "" {
		s = e.Error.Message
	}
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s))
	if len(s) <= 200 {
		return s
	}
	cut := 200
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
