package clientapi

import (
	"encoding/json"
	"testing"
)

// FuzzParseRequest: any body either parses into a request whose model is a non-empty string and
// whose re-encoded body carries the renamed model, or is refused with a 400 message. Never a panic.
// A parser that matches member names case-insensitively (encoding/json into a struct, as some
// upstreams decode) must read the same model and stream as the gateway did, and the renamed
// model from the body sent upstream: duplicate and case-variant members cannot smuggle a model.
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
		`{"model":"gpt-4o","MODEL":"o1-pro"}`, `{"Model":"o1-pro","model":"gpt-4o"}`, `{"model":"gpt-4o","Stream":true}`,
		`{"model":"gpt-4o","mod\u0065l":"o1-pro"}`, "{\"model\":\"gpt-4o\",\"mode\u212a\":1}", "{\"model\":\"gpt-4o\",\"\u017ftream\":true}",
		`{"model":"gpt-4o","model":"o1-pro","stream":false,"stream":true}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRequest(body)
		if err != nil {
			if _, ok := err.(BadRequest); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if r.Model == "" {
			t.Fatal("accepted an empty model")
		}
		out, err := r.BodyFor("upstream-model")
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
		if again, _ := ParseRequest(body); again.Model != r.Model {
			t.Fatal("BodyFor changed the parsed request")
		}
		var folded struct {
			Model  string
			Stream *bool
		}
		if json.Unmarshal(body, &folded) == nil {
			if folded.Model != r.Model || (folded.Stream != nil && *folded.Stream != r.Stream) {
				t.Fatalf("a case-insensitive parser reads model %q stream %v, the gateway %q %v", folded.Model, folded.Stream, r.Model, r.Stream)
			}
		}
		folded.Model = ""
		if err := json.Unmarshal(out, &folded); err != nil || folded.Model != "upstream-model" {
			t.Fatalf("a case-insensitive parser reads model %q from the body sent upstream (%v)", folded.Model, err)
		}
	})
}
