// Package clientapi is the gateway's side of the client APIs it serves (OpenAI's chat
// completions, completions, embeddings and Responses, Anthropic's Messages): the request paths,
// the checks a client body passes before anything reaches a provider, and the error bodies in
// the shape the client's SDK parses.
package clientapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/anthropic"
)

// Shape is the JSON error body a client's SDK parses. It follows the endpoint called, never
// the ResponseWriter: client keys, the audit log and metrics wrap the writer, and a wrapped writer
// must not turn a Messages client's error into one its SDK cannot read.
type Shape uint8

const (
	// ShapeOpenAI: {"error":{"message","type","param","code"}}.
	ShapeOpenAI Shape = iota
	// ShapeAnthropic: {"type":"error","error":{"type","message"}}, on /v1/messages and
	// /v1/messages/count_tokens.
	ShapeAnthropic
)

// ShapeFor is the error shape of a request path, with or without the /v1 prefix and a trailing
// slash.
func ShapeFor(path string) Shape {
	p := strings.TrimPrefix(strings.TrimRight(path, "/"), "/v1")
	if IsMessagesPath(p) {
		return ShapeAnthropic
	}
	return ShapeOpenAI
}

// APIError is OpenAI's error shape: {"error":{"message","type","param","code"}}.
type APIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// WriteError answers a client with one of the gateway's own errors in the shape of its endpoint.
// typ and code are OpenAI's error.type and error.code; Anthropic's shape has no code and takes its
// type from the status (anthropicErrorType). retryAfter > 0 adds Retry-After.
func WriteError(w http.ResponseWriter, shape Shape, status int, typ, code, msg string, retryAfter time.Duration) {
	h := w.Header()
	if retryAfter > 0 {
		secs := int((retryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.Itoa(secs))
	}
	var b []byte
	if shape == ShapeAnthropic {
		b = anthropic.ErrorBody(anthropicErrorType(status), msg)
	} else {
		e := APIError{Message: msg, Type: typ}
		if code != "" {
			e.Code = &code
		}
		b, _ = json.Marshal(struct {
			Error APIError `json:"error"`
		}{e})
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// anthropicErrorType is the Messages API error type of a status the gateway answers: Anthropic's
// own mapping, but for a 503 of the gateway's (overloaded, nothing could answer), which is
// overloaded_error, the type Anthropic's SDKs retry as OpenAI's retry a 503.
func anthropicErrorType(status int) string {
	if status == http.StatusServiceUnavailable {
		return "overloaded_error"
	}
	return anthropic.ErrorType(status)
}
