package clientapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/switchyard-io/switchyard/internal/jsonraw"
)

// Request is what the proxy needs from a client's JSON body; the body itself is forwarded
// with only "model" rewritten.
type Request struct {
	Model  string
	Stream bool
	// body is the client's body (trimmed) and models the bounds of every top-level "model" value
	// in it: an attempt rewrites just those bytes, never re-encodes the rest.
	Body   []byte
	models [][2]int
	// Fields is set instead when the body took the full-decode path (see parseRequestSlow).
	Fields map[string]json.RawMessage
}

// BadRequest marks a body the client must fix; its message goes back in a 400. Code, when
// set, is the error code (and the rejection reason) instead of invalid_request.
type BadRequest struct{ msg, Code string }

func (e BadRequest) Error() string { return e.msg }

// ParseRequest checks a client body: a JSON object with a non-empty string "model" and, when
// present, a boolean "stream". Anything else is the caller's error and never reaches a provider.
// Duplicate members behave as encoding/json decodes them: the last one counts.
func ParseRequest(body []byte) (*Request, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, BadRequest{msg: "request body is empty; expected a JSON object with a \"model\" field"}
	}
	if body[0] != '{' || !json.Valid(body) {
		return parseRequestSlow(body) // every error message comes from one place
	}
	r := &Request{Body: body}
	var modelRaw, streamRaw []byte
	var folded string // a member whose name differs from "model" or "stream" only in case
	if !jsonraw.EachMember(body, 0, func(key []byte, start, end int) bool {
		switch {
		case jsonraw.KeyIs(key, "model"):
			modelRaw = body[start:end]
			r.models = append(r.models, [2]int{start, end})
		case jsonraw.KeyIs(key, "stream"):
			streamRaw = body[start:end]
		case jsonraw.KeyFolds(key, "model") || jsonraw.KeyFolds(key, "stream"):
			folded = jsonraw.KeyString(key)
			return false
		}
		return true
	}) {
		return parseRequestSlow(body)
	}
	if folded != "" {
		return nil, errFolded(folded)
	}
	if modelRaw == nil {
		return nil, BadRequest{msg: "you must provide a model parameter"}
	}
	if s, ok := jsonraw.PlainString(modelRaw); ok {
		r.Model = s
	} else if err := json.Unmarshal(modelRaw, &r.Model); err != nil {
		r.Model = ""
	}
	if r.Model == "" {
		return nil, BadRequest{msg: "model must be a non-empty string"}
	}
	switch string(streamRaw) {
	case "", "null", "false":
	case "true":
		r.Stream = true
	default:
		return nil, BadRequest{msg: "stream must be a boolean"}
	}
	return r, nil
}

// parseRequestSlow decodes the whole body into a map: the reference behaviour, used for bodies
// that are not a valid JSON object, so that their error messages stay as they were.
func parseRequestSlow(body []byte) (*Request, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, BadRequest{msg: fmt.Sprintf("request body is not valid JSON (at byte %d): %v", syn.Offset, err)}
		}
		return nil, BadRequest{msg: "request body must be a JSON object: " + err.Error()}
	}
	if fields == nil {
		return nil, BadRequest{msg: "request body must be a JSON object"}
	}
	for k := range fields {
		if k != "model" && k != "stream" && (strings.EqualFold(k, "model") || strings.EqualFold(k, "stream")) {
			return nil, errFolded(k)
		}
	}
	raw, ok := fields["model"]
	if !ok {
		return nil, BadRequest{msg: "you must provide a model parameter"}
	}
	r := &Request{Fields: fields}
	if err := json.Unmarshal(raw, &r.Model); err != nil || r.Model == "" {
		return nil, BadRequest{msg: "model must be a non-empty string"}
	}
	if raw, ok := fields["stream"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &r.Stream); err != nil {
			return nil, BadRequest{msg: "stream must be a boolean"}
		}
	}
	return r, nil
}

// errFolded refuses a body with a member named like a routing field but for case ("MODEL",
// "Stream", or a Unicode look-alike such as the Kelvin sign): the gateway routes, meters and
// logs by "model" while an upstream that matches names case-insensitively (as encoding/json
// does) could serve the other one on the channel's key.
func errFolded(name string) error {
	return BadRequest{Code: "ambiguous_field", msg: fmt.Sprintf(
		"the request has a member %q that differs from %q only in case; send each field once, in lower case",
		name, strings.ToLower(name))}
}

// BodyFor returns the body to send upstream with the model renamed. The client's bytes are kept
// as they are but for the "model" value; when the upstream name is the one the client sent, the
// body goes out unchanged. The result must not be modified: it may be the client's body itself.
func (r *Request) BodyFor(upstreamModel string) ([]byte, error) {
	if r.Fields != nil {
		m, err := json.Marshal(upstreamModel)
		if err != nil {
			return nil, err
		}
		old := r.Fields["model"]
		r.Fields["model"] = m
		defer func() { r.Fields["model"] = old }()
		return json.Marshal(r.Fields)
	}
	if len(r.models) == 1 && upstreamModel == r.Model {
		return r.Body, nil
	}
	name := jsonraw.AppendQuoted(nil, upstreamModel)
	out := make([]byte, 0, len(r.Body)+len(r.models)*len(name))
	prev := 0
	for _, m := range r.models {
		out = append(out, r.Body[prev:m[0]]...)
		out = append(out, name...)
		prev = m[1]
	}
	return append(out, r.Body[prev:]...), nil
}

// BodyOr is the request's body when it holds one (admit may have rewritten it), else b.
func (r *Request) BodyOr(b []byte) []byte {
	if r.Body != nil {
		return r.Body
	}
	return b
}

// Size is the client body's length (its text is at most that).
func (r *Request) Size() int {
	if r.Body != nil {
		return len(r.Body)
	}
	n := 0
	for _, v := range r.Fields {
		n += len(v)
	}
	return n
}
