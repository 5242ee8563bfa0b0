// Package anthropic translates between OpenAI chat completions and Anthropic's Messages API, in
// both directions, requests, answers, streams and errors, and OpenAI's Responses API to the
// Messages API and back (respreq.go, respresp.go). The Messages JSON is the gateway's
// lingua franca for Claude: the Anthropic provider speaks it directly, and the Bedrock and Vertex
// adapters take a Messages body and give back Messages answers and stream events.
//
// OpenAI's structured output (response_format, text.format) goes as the Messages API's
// output_config.format or as a forced tool, by the Target the body is for, and a strict answer is
// validated against its schema (structured.go).
//
// Every function is pure: bytes in, bytes out, no I/O, no clock (the caller passes the time a
// translated answer is stamped with). A request field that has no equivalent on the other side is
// refused with a *FieldError naming it, never dropped in silence.
//
// The wire formats follow the official SDKs (github.com/anthropics/anthropic-sdk-go, npm
// @anthropic-ai/sdk and openai). Their types are not used: a gateway must carry fields it does
// not know, and the SDKs' parameter types drop them; see docs/providers.md.
package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DefaultVersion is the anthropic-version header sent when the client gives none.
const DefaultVersion = "2023-06-01"

// FallbackMaxTokens is the max_tokens sent to the Messages API, which requires one, when neither
// the client nor the model's capabilities give one: every Claude model accepts it.
const FallbackMaxTokens = 4096

// FieldError is a request the other API cannot express: Field names the member (a JSON path such
// as "n" or "messages[2].content[0].type"). It is the caller's to fix: a 400.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Usage is an answer's token counts, in OpenAI's terms.
type Usage struct {
	Prompt     int
	Completion int
}

// StreamOut is what one upstream stream event becomes for the client.
type StreamOut struct {
	// Data is the client's events, each terminated by a blank line; empty when the event carries
	// nothing for the client (a ping, a block's end) or is held back (see the stream types).
	Data []byte
	// Finished: the answer is complete (a finish_reason, a stop_reason, message_stop).
	Finished bool
	// Usage, when the event carried the answer's token counts.
	Usage *Usage
}

// object decodes a JSON object into its members; null members are left out, so that a client's
// explicit null means "not given", as it does to both APIs.
func object(b []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	for k, v := range m {
		if string(v) == "null" {
			delete(m, k)
		}
	}
	return m, nil
}

// mustJSON encodes v without HTML escaping: a model's "<" stays "<", as the provider sent it.
func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only maps, slices, strings, numbers and raw messages that were valid JSON are encoded.
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// event is one server-sent event in Anthropic's form: an event line and a data line.
func event(typ string, v any) []byte {
	return append(append(append([]byte("event: "+typ+"\ndata: "), mustJSON(v)...), '\n'), '\n')
}

// chunk is one server-sent event in OpenAI's form: a data line.
func chunk(v any) []byte {
	return append(append([]byte("data: "), mustJSON(v)...), '\n', '\n')
}
