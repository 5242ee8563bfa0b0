package sse

import (
	"encoding/json"
	"strconv"

	"github.com/switchyard-io/switchyard/internal/jsonraw"
)

// eventBody is the part of a stream event's data the proxy reads: whether it finishes the answer,
// whether it is an upstream error, and the usage it carries.
type eventBody struct {
	Choices []struct {
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage           `json:"usage"`
	Type  string           `json:"type"`
	Error *json.RawMessage `json:"error"`
	Resp  *struct {
		Usage *Usage `json:"usage"`
	} `json:"response"`
}

// decodeEvent decodes data as json.Unmarshal(data, &body) would (field names match
// case-insensitively, the last duplicate counts, a value of the wrong type fails the whole event)
// without decoding what the proxy never looks at, such as each chunk's delta. Choices is left
// empty: finished reports a choice with a non-empty finish_reason. ok is false where
// json.Unmarshal would return an error.
func decodeEvent(data []byte) (body eventBody, finished, ok bool) {
	if !json.Valid(data) {
		return body, false, false
	}
	i := jsonraw.SkipSpace(data, 0)
	switch data[i] {
	case '{':
	case 'n': // null: nothing
		return body, false, true
	default:
		return body, false, false // not an object: a type error
	}
	ok = true
	choices, again := false, false
	walked := jsonraw.EachMember(data, i, func(key []byte, start, end int) bool {
		v := data[start:end]
		switch {
		case jsonraw.KeyFolds(key, "choices"):
			if choices {
				again = true // a repeated "choices" decodes over the first one's elements: leave it to encoding/json
				return false
			}
			choices = true
			finished, ok = decodeChoices(v)
		case jsonraw.KeyFolds(key, "type"):
			if s, plain := jsonraw.PlainString(v); plain {
				body.Type = s
			} else if string(v) != "null" {
				t := body.Type
				ok = json.Unmarshal(v, &t) == nil
				body.Type = t
			}
		case jsonraw.KeyFolds(key, "usage"):
			ok = decodeUsage(v, &body.Usage)
		case jsonraw.KeyFolds(key, "error"):
			e := body.Error
			ok = json.Unmarshal(v, &e) == nil
			body.Error = e
		case jsonraw.KeyFolds(key, "response"):
			r := body.Resp
			ok = json.Unmarshal(v, &r) == nil
			body.Resp = r
		}
		return ok
	})
	if again {
		var ref eventBody
		if json.Unmarshal(data, &ref) != nil {
			return body, false, false
		}
		for _, c := range ref.Choices {
			if c.FinishReason != nil && *c.FinishReason != "" {
				finished = true
			}
		}
		ref.Choices = nil
		return ref, finished, true
	}
	return body, finished, ok && walked
}

// decodeChoices reads a "choices" value: null, or an array of objects (or nulls) whose
// finish_reason is a string or null. finished: one of them is a non-empty string.
func decodeChoices(v []byte) (finished, ok bool) {
	if string(v) == "null" {
		return false, true
	}
	ok = true
	walked := jsonraw.EachElement(v, 0, func(start, end int) bool {
		el := v[start:end]
		switch el[0] {
		case 'n':
			return true
		case '{':
		default:
			ok = false
			return false
		}
		var reason []byte // the last finish_reason of this choice; nil for none or null
		if !jsonraw.EachMember(el, 0, func(key []byte, s, e int) bool {
			if !jsonraw.KeyFolds(key, "finish_reason") {
				return true
			}
			switch r := el[s:e]; r[0] {
			case 'n':
				reason = nil
			case '"':
				reason = r
			default:
				ok = false
				return false
			}
			return true
		}) {
			ok = false
		}
		if len(reason) > 2 { // a string other than ""
			finished = true
		}
		return ok
	})
	return finished, ok && walked
}

// decodeUsage decodes a usage value into *u as json.Unmarshal(v, u) would: null sets it to nil,
// an object is merged into it (allocated when nil), and a token count must be an integer.
func decodeUsage(v []byte, u **Usage) bool {
	switch v[0] {
	case 'n':
		*u = nil
		return true
	case '{':
	default:
		return false
	}
	if *u == nil {
		*u = new(Usage)
	}
	dst := *u
	ok := true
	walked := jsonraw.EachMember(v, 0, func(key []byte, start, end int) bool {
		var field *int
		switch {
		case jsonraw.KeyFolds(key, "prompt_tokens"):
			field = &dst.PromptTokens
		case jsonraw.KeyFolds(key, "completion_tokens"):
			field = &dst.CompletionTokens
		case jsonraw.KeyFolds(key, "input_tokens"):
			field = &dst.InputTokens
		case jsonraw.KeyFolds(key, "output_tokens"):
			field = &dst.OutputTokens
		case jsonraw.KeyFolds(key, "cache_creation_input_tokens"):
			field = &dst.CacheCreationInputTokens
		case jsonraw.KeyFolds(key, "cache_read_input_tokens"):
			field = &dst.CacheReadInputTokens
		default:
			return true
		}
		n := v[start:end]
		switch c := n[0]; {
		case c == 'n':
			return true // null leaves the field as it is
		case c == '-' || c >= '0' && c <= '9':
			x, err := strconv.ParseInt(string(n), 10, strconv.IntSize)
			if err != nil {
				ok = false // a fraction, an exponent or out of range: not an int
				return false
			}
			*field = int(x)
			return true
		default:
			ok = false
			return false
		}
	})
	return ok && walked
}

// AnswerUsage is the usage of a non-streamed answer, as json.Unmarshal of the body into
// struct{ Usage *usage } finds it; ok is false when there is none or the body would not decode.
func AnswerUsage(body []byte) (u Usage, ok bool) {
	if !json.Valid(body) {
		return u, false
	}
	i := jsonraw.SkipSpace(body, 0)
	if body[i] != '{' {
		return u, false // null has no usage; anything else is a type error
	}
	var p *Usage
	valid := true
	if !jsonraw.EachMember(body, i, func(key []byte, start, end int) bool {
		if jsonraw.KeyFolds(key, "usage") && !decodeUsage(body[start:end], &p) {
			valid = false
			return false
		}
		return true
	}) || !valid || p == nil {
		return u, false
	}
	return *p, true
}
