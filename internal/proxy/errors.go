package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// apiError is OpenAI's error shape: {"error":{"message","type","param","code"}}.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// writeError answers a client in OpenAI's JSON error shape. retryAfter > 0 adds Retry-After.
func writeError(w http.ResponseWriter, status int, typ, code, msg string, retryAfter time.Duration) {
	if retryAfter > 0 {
		secs := int((retryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if _, ok := w.(*messagesWriter); ok {
		writeMessagesError(w, status, msg)
		return
	}
	e := apiError{Message: msg, Type: typ}
	if code != "" {
		e.Code = &code
	}
	b, _ := json.Marshal(struct {
		Error apiError `json:"error"`
	}{e})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// upstreamErrorCode extracts error.code (or error.type) from an OpenAI-style error body, so
// context_length_exceeded and content_policy_violation can be told apart from other 400s.
func upstreamErrorCode(body []byte) string {
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
