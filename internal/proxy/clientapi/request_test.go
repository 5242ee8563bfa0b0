package clientapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

var parseSeeds = []string{
	`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gpt-4o","stream":true}`, `{"model":"gpt-4o","stream":false}`, `{"model":"gpt-4o","stream":null}`,
	`{"model":"gpt-4o","stream":1}`, `{"model":"gpt-4o","stream":"true"}`,
	`{"model":""}`, `{"model":4}`, `{"model":null}`, `{"stream":"yes","model":"x"}`,
	`[]`, `null`, `"model"`, ``, `{`, `{}`, ` { "model" : "a" , "x" : [ 1 , { "model" : "inner" } ] } `,
	`{"model":"a\u0000b"}`, `{"model":"x","model":"y"}`, `{"model":4,"model":"y"}`, `{"model":"y","model":4}`,
	`{"mod\u0065l":"escaped-key"}`, `{"Model":"wrong-case"}`, `{"model":"caf\u00e9"}`, "{\"model\":\"caf\xc3\xa9\"}",
	"{\"model\":\"bad\xff\"}", `{"model":"<&>"}`, `{"model":"q\"uote"}`, `{"a":"}","model":"m","b":"\\"}`,
	"\xff\xfe{\"model\":\"x\"}", `{"model":"x"}garbage`, `{"model":"x",}`, `{"model":1e5}`,
}

// FuzzParseRequestMatchesFullDecode: the hot-path parser and rewrite agree with decoding the whole
// body into a map (the reference) on every input: same model, stream flag and error, and an
// upstream body that decodes to the same object but for the model.
func FuzzParseRequestMatchesFullDecode(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s), "upstream-model")
	}
	f.Add([]byte(`{"model":"gpt-4o"}`), "gpt-4o")
	f.Add([]byte(`{"model":"gpt-4o"}`), "needs \"escaping\" <&>")
	f.Fuzz(func(t *testing.T, body []byte, upstream string) {
		fast, ferr := ParseRequest(body)
		ref, rerr := parseRequestSlow(bytes.TrimSpace(body))
		if len(bytes.TrimSpace(body)) == 0 {
			return
		}
		if (ferr == nil) != (rerr == nil) || (ferr != nil && ferr.Error() != rerr.Error()) {
			t.Fatalf("errors differ for %q: fast %v, reference %v", body, ferr, rerr)
		}
		if ferr != nil {
			return
		}
		if fast.Model != ref.Model || fast.Stream != ref.Stream {
			t.Fatalf("%q: fast (%q, %v), reference (%q, %v)", body, fast.Model, fast.Stream, ref.Model, ref.Stream)
		}
		got, err := fast.BodyFor(upstream)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.BodyFor(upstream)
		if err != nil {
			t.Fatal(err)
		}
		var g, w map[string]any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("rewritten body %q is not JSON: %v", got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("rewritten bodies differ:\n fast %s\n  ref %s", got, want)
		}
	})
}
