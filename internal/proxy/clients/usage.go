package clients

import (
	"bytes"
	"encoding/json"
)

// WithIncludeUsage returns the body with stream_options.include_usage true, and whether the
// client had asked for it itself. ok is false when the body cannot be rewritten.
func WithIncludeUsage(body []byte, fields map[string]json.RawMessage) (out []byte, asked, ok bool) {
	if fields == nil {
		if json.Unmarshal(body, &fields) != nil {
			return nil, false, false
		}
	} else {
		fields = maps2(fields)
	}
	opts := map[string]json.RawMessage{}
	if raw, has := fields["stream_options"]; has && !bytes.Equal(raw, []byte("null")) {
		if json.Unmarshal(raw, &opts) != nil {
			return nil, false, false // the upstream will say what is wrong with it
		}
		if v, has := opts["include_usage"]; has && bytes.Equal(bytes.TrimSpace(v), []byte("true")) {
			return body, true, true
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	o, err := json.Marshal(opts)
	if err != nil {
		return nil, false, false
	}
	fields["stream_options"] = o
	out, err = json.Marshal(fields)
	return out, false, err == nil
}

func maps2(m map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// StripUsageChunk leaves out of a stream event (raw, its data) the usage-only chunk the proxy
// asked for on the client's behalf (its tokens are counted already): choices empty, usage set.
// dropped says whether it did. A translated event (translated: the channel speaks another API
// than the client) may carry several chunks, an Anthropic message_delta becoming the
// finish_reason chunk and the usage chunk: only the usage chunk goes, and the finish_reason still
// reaches the client.
func StripUsageChunk(raw, data []byte, translated bool) (out []byte, dropped bool) {
	if !translated {
		if usageOnly(data) {
			return nil, true
		}
		return raw, false
	}
	for _, chunk := range bytes.SplitAfter(raw, []byte("\n\n")) {
		d, _ := bytes.CutPrefix(bytes.TrimRight(chunk, "\n"), []byte("data: "))
		if len(chunk) > 0 && usageOnly(d) {
			dropped = true
			continue
		}
		out = append(out, chunk...)
	}
	return out, dropped
}

// usageOnly reports whether a chat completion chunk carries usage alone (no choices).
func usageOnly(data []byte) bool {
	var chunk struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   json.RawMessage   `json:"usage"`
	}
	return json.Unmarshal(data, &chunk) == nil && len(chunk.Choices) == 0 && len(chunk.Usage) > 0 && string(chunk.Usage) != "null"
}
