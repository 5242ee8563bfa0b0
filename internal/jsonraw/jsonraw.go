// Package jsonraw is the proxy's allocation-free JSON on the hot path: a walker over raw JSON
// (scan.go) and a writer of JSON string literals that keep invalid UTF-8 bytes as they are, where
// encoding/json would turn them into U+FFFD: the proxy relays the bytes a provider sent (a
// character split across stream events), and the mock providers send such streams on purpose.
package jsonraw

// AppendString appends b as a JSON string literal, escaping only what JSON requires (the quote,
// the backslash and control characters).
func AppendString(dst, b []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
