package clients

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// TestIndexLookup: a key finds its client by hash, an unknown key or no table finds none, and a
// hash the controller cannot have written is left out and reported without its value.
func TestIndexLookup(t *testing.T) {
	key := strings.Repeat("k", 40)
	bad := strings.Repeat("Z", 64)
	tbl := &routing.Table{ProxyReplicas: 3, Clients: []routing.Client{
		{Namespace: "team", Name: "one", KeyHashes: []string{routing.KeyHash(key), bad}},
		{Namespace: "team", Name: "two", KeyHashes: []string{routing.KeyHash(strings.Repeat("j", 40))}},
	}}
	made := 0
	ix, invalid := NewIndex(tbl, false, func(c *routing.Client) *Limiter {
		made++
		return &Limiter{Namespace: c.Namespace, Name: c.Name}
	})
	if made != 2 || len(ix.Entries) != 2 || ix.Clients != 2 || ix.Replicas != 3 || !ix.Required {
		t.Fatalf("index %+v, %d limiters", ix, made)
	}
	if len(invalid) != 1 || invalid[0] != (InvalidHash{Client: "team/one", Index: 1, Length: 64}) {
		t.Errorf("invalid hashes %+v", invalid)
	}
	e, id := ix.Lookup(key)
	if e == nil || e.ID != "team/one" || e.Limiter.Name != "one" || id != routing.KeyHash(key)[:8] {
		t.Errorf("Lookup(key) = %+v, %q", e, id)
	}
	if e, id := ix.Lookup(strings.Repeat("x", 40)); e != nil || len(id) != 8 {
		t.Errorf("an unknown key found %+v (%q)", e, id)
	}
	if e, _ := (*Index)(nil).Lookup(key); e != nil {
		t.Error("a key found a client without a table")
	}
}

// TestIndexOpenOrRequired: keys are required with clients in the table or when the proxy asks
// for them, and open otherwise.
func TestIndexOpenOrRequired(t *testing.T) {
	none := func(*routing.Client) *Limiter { return nil }
	if ix, _ := NewIndex(&routing.Table{}, false, none); ix.Required || !strings.Contains(ix.Reason, "anyone") {
		t.Errorf("open: %+v", ix)
	}
	if ix, _ := NewIndex(&routing.Table{}, true, none); !ix.Required || !strings.Contains(ix.Reason, "401") {
		t.Errorf("required without clients: %+v", ix)
	}
}

func TestPresentedKey(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{"Authorization", "Bearer  sk-1 ", "sk-1"},
		{"Authorization", "bearer sk-2", "sk-2"},
		{"Authorization", "Basic abc", ""},
		{"Api-Key", " az-1", "az-1"},
		{"X-Api-Key", "ant-1", "ant-1"},
	} {
		h := http.Header{}
		h.Set(tc.name, tc.value)
		if got := PresentedKey(h); got != tc.want {
			t.Errorf("%s: %q -> %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
}

// TestWithIncludeUsage: a stream's body asks for the usage, keeping what the client set, and
// says when the client had asked itself.
func TestWithIncludeUsage(t *testing.T) {
	out, asked, ok := WithIncludeUsage([]byte(`{"model":"m","stream":true,"stream_options":{"x":1}}`), nil)
	if !ok || asked || !strings.Contains(string(out), `"include_usage":true`) || !strings.Contains(string(out), `"x":1`) {
		t.Errorf("rewrite: %s %v %v", out, asked, ok)
	}
	if _, asked, ok := WithIncludeUsage([]byte(`{"stream_options":{"include_usage":true}}`), nil); !ok || !asked {
		t.Error("the client's own include_usage is not seen")
	}
	if _, _, ok := WithIncludeUsage([]byte(`{"stream_options":7}`), nil); ok {
		t.Error("stream_options that is no object was rewritten")
	}
}

// TestStripUsageChunk: only the usage-only chunk goes, from a passed-through event and from a
// translated event that carries the finish_reason chunk too.
func TestStripUsageChunk(t *testing.T) {
	usage := `{"choices":[],"usage":{"prompt_tokens":3}}`
	if out, dropped := StripUsageChunk([]byte("data: "+usage+"\n\n"), []byte(usage), false); !dropped || out != nil {
		t.Errorf("passthrough: %q %v", out, dropped)
	}
	finish := `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	out, dropped := StripUsageChunk([]byte(finish+"data: "+usage+"\n\n"), nil, true)
	if !dropped || string(out) != finish {
		t.Errorf("translated: %q %v", out, dropped)
	}
}
