package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ErrorType is the Messages API error type for an HTTP status, as Anthropic answers it.
func ErrorType(status int) string {
	switch {
	case status == http.StatusBadRequest:
		return "invalid_request_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusPaymentRequired:
		return "billing_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusGatewayTimeout:
		return "timeout_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	default:
		return "invalid_request_error"
	}
}

// errorObject is the Messages API error, its members in Anthropic's order.
type errorObject struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func newError(typ, message string) errorObject {
	e := errorObject{Type: "error"}
	e.Error.Type, e.Error.Message = typ, message
	return e
}

// ErrorBody is a Messages API error body.
func ErrorBody(typ, message string) []byte { return mustJSON(newError(typ, message)) }

// ErrorEvent is a Messages stream's in-band error event.
func ErrorEvent(typ, message string) []byte { return event("error", newError(typ, message)) }

// UpstreamError is what an Anthropic error body says.
type UpstreamError struct {
	Type    string
	Message string
}

// ParseError reads a Messages API error body or "error" stream event
// ({"type":"error","error":{"type","message"}}); ok is false when b is not one. It is the one
// parser of Anthropic errors: the direct anthropic channels, the bedrock and vertex adapters and
// the translation to OpenAI's shape all read them here. An OpenAI error ({"error":{"type",...}}
// without the top-level "type":"error") is not one.
func ParseError(b []byte) (UpstreamError, bool) {
	var e errorObject
	if json.Unmarshal(b, &e) != nil || e.Type != "error" || e.Error.Type == "" {
		return UpstreamError{}, false
	}
	return UpstreamError{Type: e.Error.Type, Message: e.Error.Message}, true
}

// ContextExceeded reports whether an Anthropic invalid_request_error says the prompt does not fit
// the model's context ("prompt is too long: 208310 tokens > 200000 maximum"): OpenAI's
// context_length_exceeded, which routes to the policy's contextOverflowModels.
func (e UpstreamError) ContextExceeded() bool {
	m := strings.ToLower(e.Message)
	return e.Type == "invalid_request_error" && (strings.Contains(m, "prompt is too long") ||
		strings.Contains(m, "context window") || strings.Contains(m, "context length"))
}

// OpenAIErrorFromMessages translates an Anthropic error body to OpenAI's error shape (for an
// OpenAI client served by an Anthropic channel); the type is kept, and a context overflow gets
// the code context_length_exceeded.
func OpenAIErrorFromMessages(status int, body []byte) []byte {
	e, ok := ParseError(body)
	if !ok {
		e = UpstreamError{Type: ErrorType(status), Message: strings.TrimSpace(string(body))}
	}
	var code any
	if e.ContextExceeded() {
		code = "context_length_exceeded"
	}
	return mustJSON(map[string]any{"error": map[string]any{"message": e.Message, "type": e.Type, "param": nil, "code": code}})
}

// MessagesErrorFromOpenAI translates an OpenAI error body to the Messages error shape (for an
// Anthropic client served by an OpenAI-compatible channel): the type follows the status, as an
// Anthropic SDK expects it to.
func MessagesErrorFromOpenAI(status int, body []byte) []byte {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	return ErrorBody(ErrorType(status), msg)
}
