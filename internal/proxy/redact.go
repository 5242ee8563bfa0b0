package proxy

import (
	"bytes"
	"regexp"
	"sort"
)

// redactor removes provider keys from whatever the proxy derives from an upstream answer (an
// error message, a passed-through 4xx body, an access-log line): providers quote the key they
// were sent in their error messages, whole or in part. It knows the configured keys and the
// shapes of the well-known ones. It is built once per config and is safe for concurrent use.
type redactor struct {
	keys     [][]byte // configured keys, longest first
	prefixes [][]byte // their first keyPrefixLen bytes: a partly masked echo starts with them
}

const (
	redacted = "[REDACTED]"
	// keyPrefixLen is how much of a configured key, quoted with the rest masked or cut
	// ("sk-abc123**********wxyz"), is enough to redact the quote. Keys shorter than this are
	// redacted only whole.
	keyPrefixLen = 8
)

// keyShapes are credentials that look like one whatever their channel: OpenAI and Anthropic keys
// (sk-..., sk-ant-..., partly masked with * as OpenAI echoes them), AWS access key ids, Google API
// keys, bearer tokens, and long hex strings (Azure OpenAI keys are 32 hex digits).
var keyShapes = regexp.MustCompile(`sk-[A-Za-z0-9_\-*]{6,}|\bAKIA[0-9A-Z]{16}\b|\bAIza[0-9A-Za-z_\-]{35}\b|(?i:bearer)\s+[A-Za-z0-9._~+/\-=*]{8,}|\b[0-9a-fA-F]{32,}\b`)

func newRedactor(keys []string) *redactor {
	r := &redactor{}
	seen := map[string]bool{}
	for _, k := range keys {
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		r.keys = append(r.keys, []byte(k))
		if len(k) >= keyPrefixLen {
			r.prefixes = append(r.prefixes, []byte(k[:keyPrefixLen]))
		}
	}
	sort.Slice(r.keys, func(i, j int) bool { return len(r.keys[i]) > len(r.keys[j]) })
	return r
}

// bytes returns b with every key removed; b itself when there was none (no copy).
func (r *redactor) bytes(b []byte) []byte {
	if r == nil {
		r = &redactor{}
	}
	out := b
	for _, k := range r.keys {
		if bytes.Contains(out, k) {
			out = bytes.ReplaceAll(out, k, []byte(redacted))
		}
	}
	for _, p := range r.prefixes {
		for from := 0; from < len(out); {
			i := bytes.Index(out[from:], p)
			if i < 0 {
				break
			}
			i += from
			end := i + len(p)
			for end < len(out) && isKeyByte(out[end]) {
				end++
			}
			out = append(append(append([]byte(nil), out[:i]...), redacted...), out[end:]...)
			from = i + len(redacted)
		}
	}
	if keyShapes.Match(out) {
		out = keyShapes.ReplaceAll(out, []byte(redacted))
	}
	return out
}

// isKeyByte: the characters a key, or its masked echo, is made of.
func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '*' || c == '.'
}
