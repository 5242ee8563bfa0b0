package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// clientRequest is what the proxy needs from a client's JSON body; the body itself is forwarded
// with only "model" rewritten.
type clientRequest struct {
	Model  string
	Stream bool
	// fields is the body as a JSON object, kept to rewrite "model" per attempt.
	fields map[string]json.RawMessage
}

// errBadRequest marks a body the client must fix; its message goes back in a 400.
type errBadRequest struct{ msg string }

func (e errBadRequest) Error() string { return e.msg }

// parseRequest checks a client body: a JSON object with a non-empty string "model" and, when
// present, a boolean "stream". Anything else is the caller's error and never reaches a provider.
func parseRequest(body []byte) (*clientRequest, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errBadRequest{"request body is empty; expected a JSON object with a \"model\" field"}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, errBadRequest{fmt.Sprintf("request body is not valid JSON (at byte %d): %v", syn.Offset, err)}
		}
		return nil, errBadRequest{"request body must be a JSON object: " + err.Error()}
	}
	if fields == nil {
		return nil, errBadRequest{"request body must be a JSON object"}
	}
	raw, ok := fields["model"]
	if !ok {
		return nil, errBadRequest{"you must provide a model parameter"}
	}
	r := &clientRequest{fields: fields}
	if err := json.Unmarshal(raw, &r.Model); err != nil || r.Model == "" {
		return nil, errBadRequest{"model must be a non-empty string"}
	}
	if raw, ok := fields["stream"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &r.Stream); err != nil {
			return nil, errBadRequest{"stream must be a boolean"}
		}
	}
	return r, nil
}

// bodyFor returns the body to send upstream with the model renamed.
func (r *clientRequest) bodyFor(upstreamModel string) ([]byte, error) {
	m, err := json.Marshal(upstreamModel)
	if err != nil {
		return nil, err
	}
	old := r.fields["model"]
	r.fields["model"] = m
	defer func() { r.fields["model"] = old }()
	return json.Marshal(r.fields)
}
