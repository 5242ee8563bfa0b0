package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	xmessage "golang.org/x/text/message"
)

// Structured output on a Messages channel. OpenAI's response_format (chat) and text.format
// (Responses) ask for JSON: of a schema (json_schema) or any JSON object (json_object). The
// Messages API has one structured-output feature, output_config.format, which takes a schema
// and constrains the decoding to it; where the target does not serve it, and for json_object,
// which has no schema, the format goes as a forced tool (tool_choice {"type":"tool"}) whose
// input schema is the format's schema, and the tool's input comes back as the answer's text.
// With strict, the answer's text is validated against the schema before it reaches the client
// (jsonschema, compiled once per request): a violation is a *SchemaViolation.
//
// Which targets serve output_config.format, from the official SDKs' sources (the Vercel AI
// SDK's @ai-sdk/anthropic getModelCapabilities, @ai-sdk/amazon-bedrock's
// MODELS_WITHOUT_RELIABLE_NATIVE_STRUCTURED_OUTPUT, @ai-sdk/google-vertex's anthropic provider;
// @anthropic-ai/bedrock-sdk and vertex-sdk carry the body as it is): see nativeFormat.

// Target is the channel a translated request goes to, as far as the translation depends on it.
type Target struct {
	// Provider is the channel's provider: anthropic, bedrock or vertex.
	Provider string
	// Model is the upstream model the body is for.
	Model string
	// MaxTokens is sent when the client gives no limit (the Messages API requires one); 0 means
	// FallbackMaxTokens.
	MaxTokens int
}

// FormatTool is the name of the forced tool a response format goes as: a client's tool may
// not take it.
const FormatTool = "switchyard_response_format"

// maxStrictSchema bounds a strict schema's size: it is compiled for every request.
const maxStrictSchema = 256 << 10

// maxValidatedText bounds the streamed text a strict answer's validation holds. No answer that
// fits a model's output limit comes near it; one over it is a violation, never passed unchecked.
const maxValidatedText = 8 << 20

// Output is what a request's structured output asks of its answer; nil when it asks for none.
type Output struct {
	// Tool: the format went as the forced tool FormatTool, whose input is the answer's text.
	Tool bool
	// schema, when the client asked for strict, is what the answer's text must be valid against.
	schema *jsonschema.Schema
}

// Strict reports whether the answer is validated against the format's schema.
func (o *Output) Strict() bool { return o != nil && o.schema != nil }

// formatTool reports whether a tool_use block is the forced format tool's.
func (o *Output) formatTool(b *contentBlock) bool {
	return o != nil && o.Tool && b != nil && b.Type == "tool_use" && b.Name == FormatTool
}

// answeredByTool reports whether an answer holds the forced format tool's call: then its input
// is the answer, and text beside it (which Claude does not write under a forced tool_choice, but
// a model may) is left out, as the Vercel AI SDK leaves it out of its own json tool's answers.
func (o *Output) answeredByTool(content []contentBlock) bool {
	for i := range content {
		if o.formatTool(&content[i]) {
			return true
		}
	}
	return false
}

// SchemaViolation is a strict answer whose text is not valid against the request's schema. It
// is the channel's answer, not its failure: the gateway answers 502 with code schema_violation.
type SchemaViolation struct {
	// Path is the first failing location in the answer, a JSON pointer ("" for the whole).
	Path   string
	Reason string
}

func (e *SchemaViolation) Error() string {
	at := e.Path
	if at == "" {
		at = "/"
	}
	return fmt.Sprintf("the model's answer does not match the response format's schema at %s: %s", at, e.Reason)
}

// SchemaViolationCode is the OpenAI error code of a *SchemaViolation.
const SchemaViolationCode = "schema_violation"

// OpenAIError is the violation as OpenAI's error body.
func (e *SchemaViolation) OpenAIError() []byte {
	return mustJSON(map[string]any{"error": e.errorObject()})
}

func (e *SchemaViolation) errorObject() map[string]any {
	return map[string]any{"message": e.Error(), "type": "server_error", "param": nil, "code": SchemaViolationCode}
}

// validate checks an answer's text against the strict schema; nil when it holds or the output
// is not strict.
func (o *Output) validate(text []byte) *SchemaViolation {
	if !o.Strict() {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return &SchemaViolation{Reason: "the answer is not JSON"}
	}
	err = o.schema.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return &SchemaViolation{Reason: err.Error()}
	}
	// The first leaf is the first failing path (causes are in the schema's order).
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	path := ""
	for _, tok := range ve.InstanceLocation {
		path += "/" + strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
	}
	return &SchemaViolation{Path: path, Reason: ve.ErrorKind.LocalizedString(english)}
}

var english = xmessage.NewPrinter(language.English)

// compileSchema compiles a strict format's schema, with no loader: a $ref outside the schema is
// an error, never a fetch.
func compileSchema(raw json.RawMessage, field string) (*jsonschema.Schema, error) {
	if len(raw) > maxStrictSchema {
		return nil, fieldErr(field, "is over %d KiB, the largest schema the gateway validates strictly", maxStrictSchema>>10)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fieldErr(field, "is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	const loc = "switchyard:response-format.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fieldErr(field, "is not a valid JSON schema: %v", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fieldErr(field, "is not a valid JSON schema (strict answers are validated against it): %s", firstLine(err.Error()))
	}
	return s, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// modelFormats is what a Claude model does with structured outputs, by the first entry whose
// substring its id holds (Anthropic's ids, Bedrock's anthropic.… and Vertex's …@date alike):
// @ai-sdk/anthropic's getModelCapabilities, in its order.
var modelFormats = []struct {
	ids []string
	// native: the model serves output_config.format; rejectsForcedTool: it refuses a forced
	// tool_choice, so a format can only go as output_config.format.
	native, rejectsForcedTool bool
}{
	{[]string{"claude-sonnet-5-5", "claude-opus-5-5"}, true, true},
	{[]string{"claude-haiku-5-5", "claude-opus-5"}, true, false},
	{[]string{"claude-fable-5-1"}, true, true},
	{[]string{"claude-fable-5", "claude-opus-4-8", "claude-opus-4-7", "claude-sonnet-5", "claude-sonnet-4-6", "claude-opus-4-6",
		"claude-sonnet-4-5", "claude-opus-4-5", "claude-haiku-4-5", "claude-opus-4-1"}, true, false},
	{[]string{"claude-sonnet-4-", "claude-opus-4-", "claude-3-haiku"}, false, false},
}

// oldClaude are the models before structured outputs (Claude 3, 2 and Instant).
var oldClaude = regexp.MustCompile(`claude-(?:instant(?:-|$)|v?2(?:$|[-.:])|3(?:$|[-.]))`)

// bedrockUnreliable are the models whose output_config.format @ai-sdk/amazon-bedrock does not
// rely on (MODELS_WITHOUT_RELIABLE_NATIVE_STRUCTURED_OUTPUT): there the format goes as a tool.
var bedrockUnreliable = []string{"claude-opus-4-7", "claude-opus-4-8", "claude-opus-5", "claude-fable-5", "claude-sonnet-5",
	"claude-sonnet-4-6", "claude-haiku-4-5"}

// nativeFormat reports whether a json_schema format goes to the target as output_config.format
// (else as a forced tool), and whether the target refuses a forced tool (so that json_object,
// which has no schema, cannot be served there at all).
//
//   - anthropic: by the model, as @ai-sdk/anthropic decides; a model no entry names (a newer
//     one, an alias) is taken to serve it, as the SDK takes any claude- model it does not know.
//   - bedrock: as anthropic, less bedrockUnreliable.
//   - vertex: never: Vertex serves it only where the Google Cloud organization policy allows the
//     structured_outputs feature, which @ai-sdk/google-vertex leaves off by default.
//
// A model that refuses a forced tool gets output_config.format wherever it runs.
func nativeFormat(t Target) (native, rejectsForcedTool bool) {
	native = !oldClaude.MatchString(t.Model)
	for _, f := range modelFormats {
		if containsAny(t.Model, f.ids) {
			native, rejectsForcedTool = f.native, f.rejectsForcedTool
			break
		}
	}
	if rejectsForcedTool {
		return true, true
	}
	switch t.Provider {
	case "vertex":
		native = false
	case "bedrock":
		native = native && !containsAny(t.Model, bedrockUnreliable)
	}
	return native, false
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// responseFormat is a client's format, from either OpenAI API.
type responseFormat struct {
	field       string // the client's member: response_format or text.format
	schemaField string // where its schema is
	typ         string // json_schema or json_object
	description string
	schema      json.RawMessage
	strict      bool
}

// structured is how a format goes into a Messages body (out), what the answer then owes the
// client (the Output), and the tool choice that forces the format tool (nil when none does).
// clientTools and toolChoice are the request's own.
func (f *responseFormat) apply(t Target, out map[string]any, clientTools bool, toolChoice map[string]any) (*Output, map[string]any, error) {
	o := &Output{}
	if f.strict && f.typ == "json_schema" {
		s, err := compileSchema(f.schema, f.schemaField)
		if err != nil {
			return nil, nil, err
		}
		o.schema = s
	}
	native, rejectsForcedTool := nativeFormat(t)
	if f.typ == "json_schema" && native {
		out["output_config"] = map[string]any{"format": map[string]any{"type": "json_schema", "schema": f.schema}}
		return o, toolChoice, nil
	}
	if rejectsForcedTool {
		return nil, nil, fieldErr(f.field, `{"type":"json_object"} cannot be served by %s: the model refuses a forced tool and constrains its output to a schema only; send {"type":"json_schema"} with a schema`, t.Model)
	}
	schema := f.schema
	if f.typ == "json_object" {
		schema = json.RawMessage(`{"type":"object"}`)
	} else if !objectSchema(schema) {
		return nil, nil, fieldErr(f.schemaField, `must be an object schema ({"type":"object"}) on this channel: the format goes as a tool's input, which is an object`)
	}
	// The forced tool is the only one the model may call: a request's own tools would never be
	// called, and an agent loop that offers them would silently stop working. So they are
	// refused, naming the field, unless the request itself rules them out (tool_choice none)
	// and only sends them for the conversation's earlier calls.
	if clientTools && (toolChoice == nil || toolChoice["type"] != "none") {
		return nil, nil, fieldErr(f.field, `on this channel the format goes as a forced tool, which would keep the model from calling the request's tools: send tool_choice "none" with it, or leave out tools or %s`, f.field)
	}
	if thinking, ok := out["thinking"].(json.RawMessage); ok && !sameJSON(thinking, `{"type":"disabled"}`) {
		return nil, nil, fieldErr(f.field, "on this channel the format goes as a forced tool, which Anthropic refuses while thinking is on: leave out thinking or %s", f.field)
	}
	desc := f.description
	if desc == "" {
		desc = "Respond with the answer as this tool's input."
	}
	tools, _ := out["tools"].([]block)
	out["tools"] = append(tools, block{"name": FormatTool, "description": desc, "input_schema": schema})
	o.Tool = true
	return o, map[string]any{"type": "tool", "name": FormatTool, "disable_parallel_tool_use": true}, nil
}

// objectSchema reports whether a schema's root is an object's, as a tool's input_schema must be.
func objectSchema(raw json.RawMessage) bool {
	var s struct {
		Type json.RawMessage `json:"type"`
	}
	return json.Unmarshal(raw, &s) == nil && sameJSON(s.Type, `"object"`)
}

// checkToolNames refuses a client's tool named as the format tool.
func checkToolNames(tools []block, field func(i int) string) error {
	for i, t := range tools {
		if t["name"] == FormatTool {
			return fieldErr(field(i), "%q is the gateway's own tool name (structured output): choose another", FormatTool)
		}
	}
	return nil
}

// textBuffer holds a strict stream's text, as the escaped content of a JSON string (the deltas
// as they came, a character split across two kept whole), for its validation at the end.
type textBuffer struct {
	escaped []byte
	over    bool
}

// add appends a delta (a JSON string) when out is strict.
func (t *textBuffer) add(out *Output, delta json.RawMessage) {
	if !out.Strict() || t.over || len(delta) < 2 {
		return
	}
	if len(t.escaped)+len(delta) > maxValidatedText {
		t.over, t.escaped = true, nil
		return
	}
	t.escaped = append(t.escaped, delta[1:len(delta)-1]...)
}

// validate checks the text held against out's schema.
func (t *textBuffer) validate(out *Output) *SchemaViolation {
	if !out.Strict() {
		return nil
	}
	if t.over {
		return &SchemaViolation{Reason: fmt.Sprintf("the answer is over the %d MiB the gateway validates", maxValidatedText>>20)}
	}
	var text string
	if err := json.Unmarshal(append(append([]byte{'"'}, t.escaped...), '"'), &text); err != nil {
		return &SchemaViolation{Reason: "the answer is not text"}
	}
	return out.validate([]byte(text))
}
