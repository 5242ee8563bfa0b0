package mockprovider

import (
	"encoding/json"
	"sort"
	"strings"
)

// Structured output, as the mock answers it: a request that asks for JSON of a schema — chat's
// response_format {"type":"json_schema","json_schema":{"schema"}}, the Responses API's text.format
// {"type":"json_schema","schema"}, the Messages API's output_config.format {"type":"json_schema",
// "schema"} (output_format in its beta) — is answered with an instance of the schema as the text (streamed in pieces); one
// that asks for any JSON object ({"type":"json_object"}) with {"text": <the mock's answer>}. Tool
// arguments are an instance of the tool's parameters too, and a tool_choice that names a tool (or
// requires one) is obeyed, so the SDKs' generateObject, withStructuredOutput and parse helpers get
// what they validate. Strings in an instance are the last user text (what the mock echoes).

// maxSchemaDepth bounds the instance of a recursive schema.
const maxSchemaDepth = 8

// structuredText is the JSON text a request asks for, if it asks for one.
func (x *exchange) structuredText() (string, bool) {
	var format struct {
		Type       string          `json:"type"`
		Schema     json.RawMessage `json:"schema"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	raw := x.req.ResponseFormat
	switch x.ep {
	case epResponses:
		var text struct {
			Format json.RawMessage `json:"format"`
		}
		_ = json.Unmarshal(x.req.TextConfig, &text)
		raw = text.Format
	case epMessages:
		var config struct {
			Format json.RawMessage `json:"format"`
		}
		_ = json.Unmarshal(x.req.OutputConfig, &config)
		raw = config.Format
		if raw == nil {
			raw = x.req.OutputFormat // the beta's name
		}
	case epChat:
	default:
		return "", false
	}
	if json.Unmarshal(raw, &format) != nil {
		return "", false
	}
	switch format.Type {
	case "json_object":
		b, _ := json.Marshal(map[string]string{"text": x.text()})
		return string(b), true
	case "json_schema":
		schema := format.Schema
		if x.ep == epChat {
			schema = format.JSONSchema.Schema
		}
		var s any
		if json.Unmarshal(schema, &s) != nil {
			return "", false
		}
		b, _ := json.Marshal(schemaInstance(s, s, x.echo(), 0))
		return string(b), true
	}
	return "", false
}

// structure makes a request for structured output answer it: its JSON is the text, in three
// pieces unless the behaviour cuts it otherwise. Behaviours with their own text (Text, echo,
// continuations) keep it.
func (x *exchange) structure() {
	if x.b.Text != "" || x.b.Mode == ModeEcho || x.b.Mode == ModeContinue || x.b.Prefill {
		return
	}
	s, ok := x.structuredText()
	if !ok {
		return
	}
	x.b.Text = s
	if x.b.ChunkBytes == 0 && x.b.Splits == "" {
		x.b.ChunkBytes = len(s)/3 + 1
	}
}

// schemaInstance is a value valid against the JSON schema s (the common subset the SDKs emit:
// type, properties, items, enum, const, anyOf/oneOf/allOf, local $ref), its strings text. root
// resolves $ref.
func schemaInstance(root, s any, text string, depth int) any {
	m, ok := s.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		return nil
	}
	if ref, ok := m["$ref"].(string); ok {
		return schemaInstance(root, resolveRef(root, ref), text, depth+1)
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := m[k].([]any); ok && len(alts) > 0 {
			for _, alt := range alts { // the first alternative that is not null
				if am, ok := alt.(map[string]any); !ok || am["type"] != "null" {
					return schemaInstance(root, alt, text, depth+1)
				}
			}
			return nil
		}
	}
	typ, _ := m["type"].(string)
	if types, ok := m["type"].([]any); ok {
		for _, t := range types {
			if ts, _ := t.(string); ts != "null" {
				typ = ts
				break
			}
		}
	}
	if typ == "" {
		if _, ok := m["properties"]; ok {
			typ = "object"
		}
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			out[name] = schemaInstance(root, props[name], text, depth+1)
		}
		return out
	case "array":
		n := 1
		if mi, ok := m["minItems"].(float64); ok && mi > 1 && mi <= 16 {
			n = int(mi)
		}
		out := make([]any, n)
		for i := range out {
			out[i] = schemaInstance(root, m["items"], text, depth+1)
		}
		return out
	case "string":
		return text
	case "integer", "number":
		v := 1.0 // or the nearest bound
		if lo, ok := m["minimum"].(float64); ok && lo > v {
			v = lo
		}
		if hi, ok := m["maximum"].(float64); ok && hi < v {
			v = hi
		}
		return v
	case "boolean":
		return true
	}
	return nil
}

// resolveRef is the schema a local $ref ("#/$defs/x", "#/definitions/x", "#") names in root.
func resolveRef(root any, ref string) any {
	if ref == "#" {
		return root
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	cur := root
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
	}
	return cur
}
