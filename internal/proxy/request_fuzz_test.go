package proxy

import (
	"encoding/json"
	"testing"
)

// FuzzParseRequest: any body either parses into a request whose model is a non-empty string and
// whose re-encoded body carries the renamed model, or is refused with a 400 message. Never a panic.
func FuzzParseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o","stream":true}`,
		`{"model":"gpt-4o","stream":null}`,
		`{"model":""}`,
		`{"model":4}`,
		`{"stream":"yes","model":"x"}`,
		`[]`, `null`, `"model"`, ``, `{`, `{"model":"a\u0000b"}`, `{"model":"x","model":"y"}`,
		"\xff\xfe{\"model\":\"x\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseRequest(body)
		if err != nil {
			if _, ok := err.(errBadRequest); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if r.Model == "" {
			t.Fatal("accepted an empty model")
		}
		out, err := r.bodyFor("upstream-model")
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		var back map[string]json.RawMessage
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("re-encoded body is not JSON: %v", err)
		}
		var m string
		if json.Unmarshal(back["model"], &m) != nil || m != "upstream-model" {
			t.Fatalf("model not renamed: %s", back["model"])
		}
		if again, _ := parseRequest(body); again.Model != r.Model {
			t.Fatal("bodyFor changed the parsed request")
		}
	})
}
