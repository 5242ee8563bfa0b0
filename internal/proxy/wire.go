package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/proxy/piimask"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// The client's API (by path) and the channel's provider decide how an attempt goes upstream:
//
//	client path            openai / azure-openai channel     anthropic channel                          bedrock / vertex channel
//	OpenAI paths           as is                              /chat/completions, /responses translated   as for anthropic, then the adapter
//	                                                          to /messages
//	/messages              translated to /chat/completions    as is (x-api-key, anthropic-version)       as is, then the adapter
//	/messages/count_tokens not served                         as is                                      not served
//
// A count_tokens request for a model no anthropic channel serves never gets here: the gateway
// estimates it (counttokens.go). One whose model has an anthropic channel too skips the others.
//
// A bedrock or vertex channel's Messages body goes to its provider.Adapter (adapters.go), which
// moves the model and anthropic_version where the cloud wants them, signs or authorizes the
// request, and reads the answer back as the Anthropic JSON or SSE events the rest of this file
// handles as it does an anthropic channel's.
//
// Anything else a channel cannot serve is left out by routing (see unfit), so upstreamFor only
// fails on a body the routing check has not seen (a probe's cannot fail).

// upstream is one attempt's request as the channel speaks it, and how its answer comes back.
type upstream struct {
	path string
	body []byte
	// anthropicVersion is sent to anthropic channels: the client's on /messages, else the default.
	anthropicVersion string
	// answer translates a non-streamed answer; nil passes it as it is.
	answer func(body []byte) ([]byte, error)
	// stream translates a stream's events; nil passes them as they are.
	stream streamConverter
	// errorBody puts an upstream error body into the client's error shape; nil leaves it.
	errorBody func(status int, body []byte) []byte
	// messagesClient: the client speaks the Messages API (its stream's end and in-band error).
	messagesClient bool
}

// streamConverter turns the upstream's stream events into the client's.
type streamConverter interface {
	Event(data []byte) (anthropic.StreamOut, error)
	// End is what a cleanly closed, complete stream still owes the client.
	End() []byte
}

// chatStream is an Anthropic stream read by an OpenAI client: [DONE] ends it (its End).
type chatStream struct{ *anthropic.ChatStream }

// responsesStream is an Anthropic stream read by a Responses API client: response.completed
// (or response.incomplete) ends it, no terminator follows.
type responsesStream struct{ *anthropic.ResponsesStream }

func (responsesStream) End() []byte { return nil }

// errorEvent is the Responses API's in-band error: an "error" event with the next sequence_number.
func (r responsesStream) errorEvent(detail string) []byte {
	return responsesErrorEvent(r.Seq(), detail)
}

// responsesErrorEvent is the Responses API's in-band error event, numbered seq: the shape the
// openai SDK throws as an APIError and the AI SDK reads as an error chunk (sequence_number is
// required there).
func responsesErrorEvent(seq int, detail string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "code": "stream_interrupted", "param": nil,
		"message": "the upstream stream was interrupted before completion: " + detail, "sequence_number": seq})
	return append(append([]byte("event: error\ndata: "), b...), '\n', '\n')
}

// messagesPassthrough reads an Anthropic stream for an Anthropic client: events go out as they
// came, but message_start and the first content_block_start are held until the first delta (so a
// failure right after message_start, as Anthropic's overloaded_error events come, can still fail
// over), and the end of the answer is recognised.
type messagesPassthrough struct {
	held    []byte
	started bool // a delta went out
	stopped bool // message_stop went out
	// usage reads the answer's token counts: the events go out unchanged, but message_start
	// holds the input tokens, nested where the proxy's event decoder does not look.
	usage anthropic.PassthroughUsage
}

func (m *messagesPassthrough) Event(data []byte) (anthropic.StreamOut, error) {
	typ, err := eventType(data)
	if err != nil {
		return anthropic.StreamOut{}, err
	}
	raw := append(append([]byte("event: "+typ+"\ndata: "), data...), '\n', '\n')
	if typ == "message_start" {
		m.usage.Event(typ, data) // the input tokens; reported with the output at the end
	}
	switch typ {
	case "message_start", "content_block_start", "ping":
		if !m.started {
			m.held = append(m.held, raw...)
			return anthropic.StreamOut{}, nil
		}
	case "message_stop":
		m.stopped = true
	}
	out := anthropic.StreamOut{Data: raw, Finished: typ == "message_stop" || (typ == "message_delta" && bytes.Contains(data, []byte(`"stop_reason"`)) && !bytes.Contains(data, []byte(`"stop_reason":null`)))}
	if typ == "message_delta" {
		out.Usage = m.usage.Event(typ, data)
	}
	if !m.started {
		m.started = true
		out.Data = append(m.held, raw...)
		m.held = nil
	}
	return out, nil
}

func (m *messagesPassthrough) End() []byte {
	if m.stopped {
		return nil
	}
	m.stopped = true
	return []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
}

// messagesStream is an OpenAI stream read by an Anthropic client.
type messagesStream struct{ *anthropic.MessageStream }

func eventType(data []byte) (string, error) {
	var ev struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return "", err
	}
	if ev.Type == "" {
		return "", errors.New("event without a type")
	}
	return ev.Type, nil
}

// speaksMessages reports whether a provider takes Messages API bodies and answers Messages JSON
// and stream events: anthropic itself, and the adapters that carry the Messages body over another
// transport (bedrock, vertex; their signing and framing are the adapter's, see adapterRequest).
func speaksMessages(provider string) bool {
	return provider == "anthropic" || isCloud(provider)
}

// translated is an attempt's request body in the channel's API: the costly part of upstreamFor,
// done once per request and channel model (routing's check and the attempt share it, see
// routeState.translation).
type translated struct {
	path         string
	body         []byte
	includeUsage bool // chat → Messages: the client asked for stream_options.include_usage
	// echo: Responses → Messages, what the response object repeats of the request.
	echo   anthropic.ResponsesEcho
	output *anthropic.Output // → Messages: what response_format or text.format asks of the answer
}

// translate puts the attempt's body into the channel's API.
func translate(a *attempt, caps routing.Capabilities) (*translated, error) {
	messages := clientapi.IsMessagesPath(a.path)
	switch {
	case isCloud(a.channel.Provider) && a.path == clientapi.PathCountTokens:
		return nil, fmt.Errorf("/v1/messages/count_tokens is served by anthropic channels only, not %s", a.channel.Provider)
	case speaksMessages(a.channel.Provider) && messages:
	case speaksMessages(a.channel.Provider) && a.path == clientapi.PathResponses:
		r, err := anthropic.MessagesFromResponses(a.body, anthropic.Target{Provider: a.channel.Provider, Model: a.upstream, MaxTokens: caps.MaxOutputTokens})
		if err != nil {
			return nil, err
		}
		return &translated{path: clientapi.PathMessages, body: r.Body, echo: r.Echo, output: r.Output}, nil
	case speaksMessages(a.channel.Provider):
		if a.path != "/chat/completions" {
			return nil, fmt.Errorf("%s channels serve /v1/chat/completions, /v1/responses and /v1/messages, not /v1%s", a.channel.Provider, a.path)
		}
		r, err := anthropic.MessagesFromChat(a.body, anthropic.Target{Provider: a.channel.Provider, Model: a.upstream, MaxTokens: caps.MaxOutputTokens})
		if err != nil {
			return nil, err
		}
		return &translated{path: clientapi.PathMessages, body: r.Body, includeUsage: r.IncludeUsage, output: r.Output}, nil
	case a.path == clientapi.PathCountTokens:
		return nil, fmt.Errorf("/v1/messages/count_tokens is served by anthropic channels only")
	case messages:
		body, err := anthropic.ChatFromMessagesRequest(a.body, a.upstream)
		if err != nil {
			return nil, err
		}
		return &translated{path: "/chat/completions", body: body}, nil
	}
	return &translated{path: a.path, body: a.body}, nil
}

// upstreamFor builds an attempt's upstream request: its translated body (a.translated when
// routing made it already), headers, and the translation of what comes back.
func upstreamFor(a *attempt, caps routing.Capabilities, now time.Time) (*upstream, error) {
	t := a.translated
	if t == nil {
		var err error
		if t, err = translate(a, caps); err != nil {
			return nil, err
		}
	}
	messages := clientapi.IsMessagesPath(a.path)
	u := &upstream{path: t.path, body: t.body, messagesClient: messages}
	switch {
	case speaksMessages(a.channel.Provider) && a.path == clientapi.PathResponses:
		return responsesUpstream(a, t, u, now), nil
	case speaksMessages(a.channel.Provider) && messages:
		u.anthropicVersion = a.header.Get("Anthropic-Version")
		if u.anthropicVersion == "" {
			u.anthropicVersion = anthropic.DefaultVersion
		}
		if a.stream {
			u.stream = &messagesPassthrough{}
		}
	case speaksMessages(a.channel.Provider):
		u.anthropicVersion = anthropic.DefaultVersion
		created := now.Unix()
		u.answer = func(b []byte) ([]byte, error) {
			out, _, err := anthropic.ChatFromMessage(b, created, t.output)
			return out, err
		}
		if a.stream {
			u.stream = chatStream{anthropic.NewChatStream(t.includeUsage, created, t.output)}
		}
		u.errorBody = anthropic.OpenAIErrorFromMessages
	case messages:
		u.answer = func(b []byte) ([]byte, error) {
			out, _, err := anthropic.MessageFromChat(b)
			return out, err
		}
		if a.stream {
			u.stream = messagesStream{anthropic.NewMessageStream()}
		}
		u.errorBody = anthropic.MessagesErrorFromOpenAI
	}
	return u, nil
}

// responsesUpstream reads a Messages channel's answer for a Responses API client.
func responsesUpstream(a *attempt, t *translated, u *upstream, now time.Time) *upstream {
	u.anthropicVersion = anthropic.DefaultVersion
	created := now.Unix()
	u.answer = func(b []byte) ([]byte, error) {
		out, _, err := anthropic.ResponsesFromMessage(b, t.echo, created, t.output)
		return out, err
	}
	if a.stream {
		u.stream = responsesStream{anthropic.NewResponsesStream(t.echo, created, t.output)}
	}
	u.errorBody = anthropic.OpenAIErrorFromMessages
	return u
}

// convertEvent translates one upstream stream event in place. false: the event is malformed for
// the converter and is passed over, as a malformed event is.
func (u *upstream) convertEvent(ev *sse.Event) bool {
	out, err := u.stream.Event(ev.Data)
	if err != nil {
		return false
	}
	ev.Raw = out.Data
	ev.NoData = len(out.Data) == 0
	ev.Finished = ev.Finished || out.Finished
	ev.Usage = nil
	if out.Usage != nil {
		ev.Usage = &sse.Usage{PromptTokens: out.Usage.Prompt, CompletionTokens: out.Usage.Completion}
	}
	return true
}

// restoreEvents runs a converted event's chunks (chat chunks, or Responses events with their
// event: line) through the PII restore one by one, as it expects them (a translated event may
// carry several).
func restoreEvents(sr *piimask.StreamRestore, raw []byte) []byte {
	var out []byte
	for _, chunk := range bytes.SplitAfter(raw, []byte("\n\n")) {
		if len(chunk) == 0 {
			continue
		}
		data := bytes.TrimRight(chunk, "\n")
		if bytes.HasPrefix(data, []byte("event: ")) {
			if _, after, ok := bytes.Cut(data, []byte("\ndata: ")); ok {
				data = after
			}
		} else {
			data, _ = bytes.CutPrefix(data, []byte("data: "))
		}
		ev := sse.Event{Raw: chunk, Data: data, Done: bytes.Equal(data, []byte("[DONE]"))}
		out = append(out, sr.Event(&ev)...)
	}
	return out
}

// streamViolation is the schema violation a translated strict stream ended with (its in-band
// error went out in place of the end), nil for none. The converter keeps it: an upstream is
// allocated per attempt, streamed or not, and holds no field for the rare case.
func (a *attempt) streamViolation() *anthropic.SchemaViolation {
	if v, ok := a.wireStream().(interface {
		Violation() *anthropic.SchemaViolation
	}); ok {
		return v.Violation()
	}
	return nil
}

// streamEnd is what a complete stream that closed without the client's terminator still gets.
func (a *attempt) streamEnd() []byte {
	switch {
	case a.wire != nil && a.wire.stream != nil:
		return a.wire.stream.End()
	case a.path == clientapi.PathResponses:
		// The Responses API ends with response.completed and no terminator: OpenAI sends no
		// [DONE], and a client parsing every event as JSON would choke on one.
		return nil
	}
	return []byte("data: [DONE]\n\n")
}

// writeStreamErrorFor ends a committed stream with an in-band error event in the client's API.
// seq is the next sequence_number of a Responses stream passed through as the channel sent it
// (responsesSeqStage); a translated one counts its own.
func writeStreamErrorFor(a *attempt, w http.ResponseWriter, f http.Flusher, detail string, seq *responsesSeqStage) {
	if r, ok := a.wireStream().(responsesStream); ok {
		_, _ = w.Write(r.errorEvent(detail))
		flushIf(f)
		return
	}
	if seq != nil && seq.on {
		_, _ = w.Write(responsesErrorEvent(seq.next, detail))
		flushIf(f)
		return
	}
	if a.wire != nil && a.wire.messagesClient {
		_, _ = w.Write(anthropic.ErrorEvent("api_error", "the upstream stream was interrupted before completion: "+detail))
		flushIf(f)
		return
	}
	writeStreamError(w, f, detail)
}

// answerFailure is the result of a non-streamed answer that could not be translated. A strict
// answer that violates its schema is the client's 502 (schema_violation), passed through as a
// 4xx is: the channel answered, the model missed the schema, so neither its health nor a
// failover (which would pay for the answer twice) follows.
func answerFailure(status int, err error) result {
	var v *anthropic.SchemaViolation
	if errors.As(err, &v) {
		return result{outcome: health.OutcomeClientError, status: http.StatusBadGateway, errCode: anthropic.SchemaViolationCode,
			body: v.OpenAIError(), header: http.Header{"Content-Type": {"application/json"}}, detail: v.Error()}
	}
	return result{outcome: health.OutcomeServerError, status: status, detail: "the upstream answer could not be translated: " + err.Error()}
}

// translationFailure is the result of an attempt whose body could not be translated.
func translationFailure(err error) result {
	return result{outcome: health.OutcomeClientError, status: http.StatusBadRequest, detail: "request cannot be translated: " + err.Error()}
}

// wireStream is the attempt's stream converter, nil when its events pass as they are.
func (a *attempt) wireStream() streamConverter {
	if a.wire == nil {
		return nil
	}
	return a.wire.stream
}
