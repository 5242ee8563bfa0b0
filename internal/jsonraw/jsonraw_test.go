package jsonraw

import (
	"encoding/json"
	"testing"
)

// Valid text comes back through encoding/json unchanged; invalid UTF-8 is kept byte for byte.
func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" and \\ back", "lines\n\r\ttabs", "\x00\x1f ctl", "ünï 中文 😀"} {
		var back string
		if err := json.Unmarshal(AppendString(nil, []byte(s)), &back); err != nil || back != s {
			t.Fatalf("%q: round trip %q, %v", s, back, err)
		}
	}
	if got := string(AppendString([]byte("x"), []byte("a\xf0\x9f"))); got != "x\"a\xf0\x9f\"" {
		t.Fatalf("invalid UTF-8 not kept as it is: %q", got)
	}
}
