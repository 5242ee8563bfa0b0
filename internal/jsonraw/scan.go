package jsonraw

import (
	"bytes"
	"encoding/json"
	"strings"
)

// A minimal JSON walker for the proxy's hot path. The proxy only needs a few top-level members of a
// client body, an upstream answer or a stream event; decoding the whole document with
// encoding/json (into a map, or through reflection) cost more than everything else the proxy does
// with a request. Every function here expects input that json.Valid accepts: callers check that
// first, and fall back to encoding/json for anything unusual, so the results are the same as a full
// decode. On malformed input the functions stay in bounds and report failure; they never panic.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func SkipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// SkipString returns the index after the string that starts at b[i] == '"', or -1.
func SkipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// SkipValue returns the index after the value that starts at b[i] (no leading space), or -1.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				j := SkipString(b, i)
				if j < 0 {
					return -1
				}
				i = j - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	default: // number, true, false, null
		for ; i < len(b); i++ {
			switch c := b[i]; {
			case c == ',' || c == '}' || c == ']' || isSpace(c):
				return i
			}
		}
		return i
	}
}

// EachMember calls fn for every member of the object whose '{' is at b[i], with the raw key
// (quotes included) and the bounds of the raw value. It stops early when fn returns false, and
// reports false when b is not an object it can walk.
func EachMember(b []byte, i int, fn func(key []byte, start, end int) bool) bool {
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		if b[i] != '"' {
			return false
		}
		k := SkipString(b, i)
		if k < 0 {
			return false
		}
		key := b[i:k]
		i = SkipSpace(b, k)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		start := SkipSpace(b, i+1)
		end := SkipValue(b, start)
		if end < 0 {
			return false
		}
		if !fn(key, start, end) {
			return true
		}
		i = SkipSpace(b, end)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
	return false
}

// EachElement calls fn for every element of the array whose '[' is at b[i].
func EachElement(b []byte, i int, fn func(start, end int) bool) bool {
	if i >= len(b) || b[i] != '[' {
		return false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return true
	}
	for i < len(b) {
		end := SkipValue(b, i)
		if end < 0 {
			return false
		}
		if !fn(i, end) {
			return true
		}
		i = SkipSpace(b, end)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return true
		default:
			return false
		}
	}
	return false
}

// KeyString is a raw JSON key (with quotes) as Go sees it after unescaping.
func KeyString(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// KeyIs reports whether a raw key is exactly name, as map[string]... decoding matches keys.
func KeyIs(raw []byte, name string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1:len(raw)-1]) == name
	}
	return KeyString(raw) == name
}

// KeyFolds reports whether a raw key names the struct field name the way encoding/json matches
// field names: exactly or case-insensitively.
func KeyFolds(raw []byte, name string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		k := raw[1 : len(raw)-1]
		if len(k) == len(name) && string(k) == name {
			return true
		}
		return strings.EqualFold(string(k), name)
	}
	return strings.EqualFold(KeyString(raw), name)
}

// PlainString returns the Go value of a raw JSON string without escapes (the common case), or
// ok == false when the string needs encoding/json to be decoded.
func PlainString(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return "", false // escapes, or non-ASCII that may need UTF-8 repair: leave it to encoding/json
		}
	}
	return string(in), true
}

// AppendQuoted appends s as a JSON string, as json.Marshal would write it.
func AppendQuoted(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
