package clientapi

import "testing"

// BenchmarkRequestBody: parsing a client body and producing the upstream body, the hot path
// against the full decode into a map and re-encode it replaced.
func BenchmarkRequestBody(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say hello in one short sentence, please, and nothing else."}],"temperature":0.2,"max_tokens":64,"stream":false}`)
	for _, c := range []struct {
		name  string
		parse func([]byte) (*Request, error)
	}{{"hot-path", ParseRequest}, {"full-decode", parseRequestSlow}} {
		for _, upstream := range []string{"gpt-4o", "gpt-4o-2024-08-06"} {
			b.Run(c.name+"/upstream="+upstream, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r, err := c.parse(body)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := r.BodyFor(upstream); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
