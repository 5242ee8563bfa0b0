// Package piimask is personal-data masking (RoutingPolicy spec.pii) on the request path: the
// prompt text of each client API masked in place before any attempt, and the session's
// placeholders put back into the answer, non-streamed and streamed.
package piimask

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/switchyard-io/switchyard/internal/jsonraw"
	"github.com/switchyard-io/switchyard/internal/pii"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// The requested model's policy decides: its
// scanner runs over the text of the client's prompt before any attempt, and every attempt
// (failover and fallback models included) sends the same masked body. Only the text members
// listed in MaskRequest are rewritten, each spliced into the client's bytes, so every other
// member (unknown ones included) goes upstream byte for byte. With restore, the session's
// placeholders are put back into the answer: every string of a non-streamed answer, and the
// text deltas of a stream (see StreamRestore). A policy with masking off costs nothing: no
// scanner, no session, no event is parsed beyond what the proxy reads anyway.

// Route is one policy's compiled masking, shared by its models' routes.
type Route struct {
	Namespace, Policy string
	mode              string // routing.PIIMask or routing.PIIBlock
	restore           bool
	scanner           *pii.Scanner
	// err is set when the table's detectors do not compile in this proxy (a table from a newer
	// controller): the policy's requests are refused rather than sent unmasked.
	err error
}

// Err is why the policy's detectors do not compile here, or nil.
func (r *Route) Err() error { return r.err }

// NewRoute compiles a policy's masking. A Route whose Err is set refuses its requests.
func NewRoute(p *routing.Policy) *Route {
	r := &Route{Namespace: p.Namespace, Policy: p.Name, mode: p.PII.Mode, restore: p.PII.Restore}
	r.scanner, r.err = pii.Compile(p.PII.Config())
	if r.err == nil && r.mode != routing.PIIMask && r.mode != routing.PIIBlock {
		r.err = fmt.Errorf("unknown mode %q", r.mode)
	}
	return r
}

// errUnscannable: the body is JSON the walker cannot follow (clientapi.ParseRequest accepted it, so this
// does not happen for valid JSON); it is refused rather than sent unscanned.
var errUnscannable = errors.New("the request body could not be scanned for personal data")

// Refusal is a request the masking refuses, as the client is told: the status, the error code
// (the rejection reason), OpenAI's error type and the message.
type Refusal struct {
	Status              int
	Code, Type, Message string
}

// Masked is a request after its policy's masking.
type Masked struct {
	// Request is the request to route: the masked one when something was masked in Mask mode.
	Request *clientapi.Request
	// Session holds the placeholders the answer gets back; nil when there is nothing to restore.
	Session *pii.Session
	// Counts is the values masked per detector.
	Counts map[string]int
}

// Apply runs the policy's masking over a parsed request (body is its bytes): the request to
// route, or why it is refused.
func (r *Route) Apply(path string, body []byte, cr *clientapi.Request) (Masked, *Refusal) {
	if r.err != nil {
		return Masked{}, &Refusal{http.StatusServiceUnavailable, "pii_unavailable", "server_error",
			fmt.Sprintf("the personal-data masking of policy %s cannot run on this gateway (%v); the request was not sent", routing.QualifiedName(r.Namespace, r.Policy), r.err)}
	}
	ss := r.scanner.NewSession()
	masked, err := MaskRequest(path, body, ss.Mask)
	if err != nil {
		return Masked{}, &Refusal{http.StatusBadRequest, "invalid_request", "invalid_request_error", err.Error()}
	}
	found := ss.Found()
	if len(found) == 0 {
		return Masked{Request: cr}, nil
	}
	if r.mode == routing.PIIBlock {
		// The detector names only: the values never go into a response, a log or a metric.
		return Masked{}, &Refusal{http.StatusBadRequest, "pii_detected", "invalid_request_error",
			fmt.Sprintf("the request contains personal data (%s), which policy %s does not let leave the gateway; remove it and retry",
				strings.Join(found, ", "), routing.QualifiedName(r.Namespace, r.Policy))}
	}
	out, err := clientapi.ParseRequest(masked)
	if err != nil || out.Model != cr.Model || out.Stream != cr.Stream {
		// Masking rewrites string values only; a body that no longer parses the same is a bug.
		return Masked{}, &Refusal{http.StatusInternalServerError, "pii_unavailable", "server_error", "masking personal data failed; the request was not sent"}
	}
	m := Masked{Request: out, Session: ss, Counts: ss.Counts()}
	if !r.restore || path == "/embeddings" {
		m.Session = nil // an embedding has no text to put the values back into
	}
	return m, nil
}

// splice collects replacements of byte ranges of src, in increasing order.
type splice struct {
	src   []byte
	edits []spliceEdit
	ok    bool // every value walked was one the walker understood
}

type spliceEdit struct {
	start, end int
	repl       []byte
}

func (sp *splice) result() []byte {
	if len(sp.edits) == 0 {
		return sp.src
	}
	sort.Slice(sp.edits, func(i, j int) bool { return sp.edits[i].start < sp.edits[j].start })
	n := len(sp.src)
	for _, e := range sp.edits {
		n += len(e.repl) - (e.end - e.start)
	}
	out := make([]byte, 0, n)
	prev := 0
	for _, e := range sp.edits {
		out = append(out, sp.src[prev:e.start]...)
		out = append(out, e.repl...)
		prev = e.end
	}
	return append(out, sp.src[prev:]...)
}

// decodeString is the Go value of the raw JSON string v.
func decodeString(v []byte) (string, bool) {
	if s, ok := jsonraw.PlainString(v); ok {
		return s, true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// str rewrites the string at src[start:end] with f; a value of another type is left alone.
func (sp *splice) str(start, end int, f func(string) string) {
	v := sp.src[start:end]
	if v[0] != '"' {
		return
	}
	s, ok := decodeString(v)
	if !ok {
		sp.ok = false
		return
	}
	if out := f(s); out != s {
		sp.edits = append(sp.edits, spliceEdit{start, end, jsonraw.AppendQuoted(nil, out)})
	}
}

// members walks the object at src[start:]; a value that is not an object is left alone.
func (sp *splice) members(start int, fn func(key []byte, s, e int)) {
	if sp.src[start] != '{' {
		return
	}
	if !jsonraw.EachMember(sp.src, start, func(key []byte, s, e int) bool { fn(key, s, e); return true }) {
		sp.ok = false
	}
}

// elements walks the array at src[start:]; a value that is not an array is left alone.
func (sp *splice) elements(start int, fn func(s, e int)) {
	if sp.src[start] != '[' {
		return
	}
	if !jsonraw.EachElement(sp.src, start, func(s, e int) bool { fn(s, e); return true }) {
		sp.ok = false
	}
}

// MaskRequest returns body with f applied to the prompt text of the endpoint's request:
//
//   - /chat/completions: messages[].content (a string, or the text of each content part),
//     messages[].tool_calls[].function.arguments and the legacy messages[].function_call.arguments
//     (tool results are messages with role tool: their content);
//   - /responses: instructions, and input (a string, or items: their content as above, a
//     function call's arguments and a function call output's output);
//   - /completions: prompt (a string or strings) and suffix;
//   - /embeddings: input (a string or strings; token arrays are left as they are).
//
// Member names match as encoding/json matches them (any case), and every duplicate is masked:
// what an upstream parser may read as the field is the field. Names (messages[].name, function
// names), tool definitions, response_format, metadata and user are not scanned.
func MaskRequest(path string, body []byte, f func(string) string) ([]byte, error) {
	m := &requestMask{sp: &splice{src: body, ok: true}, f: f}
	i := jsonraw.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, errUnscannable
	}
	m.sp.members(i, func(key []byte, s, e int) { m.field(path, key, s, e) })
	if !m.sp.ok {
		return nil, errUnscannable
	}
	return m.sp.result(), nil
}

// requestMask is one MaskRequest: a walker for each shape the prompt text takes.
type requestMask struct {
	sp *splice
	f  func(string) string
}

// str masks the string at src[s:e]; a value of another type is left alone.
func (m *requestMask) str(s, e int) { m.sp.str(s, e, m.f) }

// field masks a member of the request object: only the endpoint's prompt fields hold prompt text.
func (m *requestMask) field(path string, key []byte, s, e int) {
	switch path {
	case "/chat/completions":
		if jsonraw.KeyFolds(key, "messages") {
			m.sp.elements(s, m.message)
		}
	case "/responses":
		switch {
		case jsonraw.KeyFolds(key, "instructions"):
			m.str(s, e)
		case jsonraw.KeyFolds(key, "input"):
			m.responsesInput(s, e)
		}
	case "/completions":
		if jsonraw.KeyFolds(key, "prompt") || jsonraw.KeyFolds(key, "suffix") {
			m.texts(s, e)
		}
	case "/embeddings":
		if jsonraw.KeyFolds(key, "input") {
			m.texts(s, e)
		}
	}
}

// responsesInput masks a Responses input: a string, or items that are strings or messages.
func (m *requestMask) responsesInput(s, e int) {
	if m.sp.src[s] == '"' {
		m.str(s, e)
		return
	}
	m.sp.elements(s, func(s, e int) {
		if m.sp.src[s] == '"' {
			m.str(s, e)
		} else {
			m.message(s, e)
		}
	})
}

// texts masks a string, or each string (and each part's text) of an array.
func (m *requestMask) texts(s, e int) {
	switch m.sp.src[s] {
	case '"':
		m.str(s, e)
	case '[':
		m.sp.elements(s, func(s, e int) {
			switch m.sp.src[s] {
			case '"':
				m.str(s, e)
			case '{':
				m.named(s, "text")
				m.named(s, "refusal") // a Responses refusal part the translation sends as text
			}
		})
	}
}

// message masks a chat message or a Responses input item.
func (m *requestMask) message(s, _ int) {
	m.sp.members(s, func(key []byte, s, e int) {
		switch {
		case jsonraw.KeyFolds(key, "content"):
			m.texts(s, e)
		case jsonraw.KeyFolds(key, "tool_calls"):
			m.sp.elements(s, func(s, _ int) {
				m.sp.members(s, func(key []byte, s, _ int) {
					if jsonraw.KeyFolds(key, "function") {
						m.named(s, "arguments")
					}
				})
			})
		case jsonraw.KeyFolds(key, "function_call"):
			m.named(s, "arguments")
		case jsonraw.KeyFolds(key, "arguments"):
			m.str(s, e) // a Responses function_call item
		case jsonraw.KeyFolds(key, "output"):
			m.texts(s, e) // a function_call_output item: a string or input_text parts
		}
	})
}

// named masks every member called name (in any case) of the object at src[s:].
func (m *requestMask) named(s int, name string) {
	m.sp.members(s, func(key []byte, s, e int) {
		if jsonraw.KeyFolds(key, name) {
			m.str(s, e)
		}
	})
}

// RestoreAll puts the session's originals back into every string value of a JSON document
// (a non-streamed answer: message content, tool call arguments, refusals, Responses output).
// Anything that is not valid JSON is returned as it is.
func RestoreAll(doc []byte, ss *pii.Session) []byte {
	if !json.Valid(doc) {
		return doc
	}
	sp := &splice{src: doc, ok: true}
	restoreValue(sp, jsonraw.SkipSpace(doc, 0), ss)
	if !sp.ok {
		return doc
	}
	return sp.result()
}

func restoreValue(sp *splice, start int, ss *pii.Session) {
	switch sp.src[start] {
	case '"':
		end := jsonraw.SkipString(sp.src, start)
		if end < 0 {
			sp.ok = false
			return
		}
		if v := sp.src[start:end]; bytes.IndexByte(v, '[') >= 0 || bytes.IndexByte(v, '\\') >= 0 {
			sp.str(start, end, ss.Restore)
		}
	case '{':
		sp.members(start, func(_ []byte, s, _ int) { restoreValue(sp, s, ss) })
	case '[':
		sp.elements(start, func(s, _ int) { restoreValue(sp, s, ss) })
	}
}
