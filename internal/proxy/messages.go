package proxy

import (
	"fmt"
	"net/http"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// need is what a request asks of a channel's model, read once per request.
type need struct {
	read bool
	anthropic.Needs
}

// needs reads the request's needs (images, tools, prompt size) on first use.
func (rt *routeState) needs() *anthropic.Needs {
	if !rt.need.read {
		rt.need.read = true
		if inspected(rt.path) {
			b := rt.req.Body
			if b == nil {
				b, _ = rt.req.BodyFor(rt.req.Model) // a body decoded by encoding/json
			}
			rt.need.Needs = inspect(rt.path, b)
		}
	}
	return &rt.need.Needs
}

// inspected says whether the proxy reads the needs of a request to path (after /v1): the APIs
// whose prompts it knows (chat completions, Responses, Messages).
func inspected(path string) bool {
	return path == "/chat/completions" || path == clientapi.PathResponses || clientapi.IsMessagesPath(path)
}

// inspect reads what a request to an inspected path asks of the model.
func inspect(path string, body []byte) anthropic.Needs {
	if path == clientapi.PathResponses {
		return anthropic.InspectResponses(body)
	}
	return anthropic.Inspect(body)
}

// promptTokensAtLeast is a lower bound on a prompt's tokens from its text: no tokenizer in use
// packs natural text into fewer than one token per 8 bytes, so a prompt over contextWindow by this
// count certainly overflows, and one under it is left for the provider to judge.
func promptTokensAtLeast(textBytes int) int { return textBytes / 8 }

// unfit says why a channel's model cannot serve this request ("" when it can): an API the
// provider does not serve, a field the translation cannot carry, a capability the model lacks,
// or a prompt certainly over its context window. Routing skips such channels; when no channel
// is left, the reason goes back in a 400 (see unfitFailure).
func (rt *routeState) unfit(ch *routing.Channel, model string) string {
	m, ok := ch.Model(model)
	if !ok {
		return ""
	}
	if why := rt.untranslatable(ch, m); why != "" {
		return why
	}
	if !m.Capabilities.Tools && speaksMessages(ch.Provider) {
		if t, _ := rt.translation(ch, m); t != nil && t.output != nil && t.output.Tool {
			return fmt.Sprintf("the request's response format goes to model %q on channel %s as a tool call and the model has no tools capability", model, ch.ID())
		}
	}
	if c := m.Capabilities; c.Vision && c.Tools && (c.ContextWindow == 0 || promptTokensAtLeast(rt.req.Size()) <= c.ContextWindow) {
		return "" // nothing to check, not even in the whole body: it is not read
	}
	n := rt.needs()
	switch {
	case n.Vision && !m.Capabilities.Vision:
		return fmt.Sprintf("the request has images and model %q has no vision capability on channel %s", model, ch.ID())
	case n.Tools && !m.Capabilities.Tools:
		return fmt.Sprintf("the request has tools and model %q has no tools capability on channel %s", model, ch.ID())
	case rt.overflows(m):
		return fmt.Sprintf("the prompt exceeds model %q's contextWindow of %d tokens on channel %s", model, m.Capabilities.ContextWindow, ch.ID())
	}
	return ""
}

func (rt *routeState) overflows(m *routing.ChannelModel) bool {
	w := m.Capabilities.ContextWindow
	// The whole body bounds its text: most requests are decided without reading it.
	return w > 0 && promptTokensAtLeast(rt.req.Size()) > w && promptTokensAtLeast(rt.needs().TextBytes) > w
}

// untranslatable says why the request cannot be put into the channel's API ("" when it can).
// The translation is made once per provider family, upstream model and output limit, and the
// attempt reuses it (translation).
func (rt *routeState) untranslatable(ch *routing.Channel, m *routing.ChannelModel) string {
	if !speaksMessages(ch.Provider) && !clientapi.IsMessagesPath(rt.path) {
		return "" // an OpenAI client on an OpenAI-compatible channel: as is
	}
	_, err := rt.translation(ch, m)
	if err != nil {
		return err.Error()
	}
	return ""
}

// translationKey names what a translated body depends on besides the request. The provider, not
// only its API family: structured output goes as output_config.format or as a forced tool by
// target (anthropic.Target), so a Vertex and an Anthropic channel of one upstream model differ.
type translationKey struct {
	provider  string
	upstream  string
	maxTokens int
}

type translationResult struct {
	t   *translated
	err error
}

// translation is the request in ch's API for model m, made on first use.
func (rt *routeState) translation(ch *routing.Channel, m *routing.ChannelModel) (*translated, error) {
	k := translationKey{provider: ch.Provider, upstream: m.Upstream, maxTokens: m.Capabilities.MaxOutputTokens}
	if r, ok := rt.translations[k]; ok {
		return r.t, r.err
	}
	body, err := rt.req.BodyFor(m.Upstream)
	var t *translated
	if err == nil {
		a := &attempt{channel: ch, path: rt.path, body: body, stream: rt.req.Stream, header: rt.header, upstream: m.Upstream}
		t, err = translate(a, m.Capabilities)
	}
	if rt.translations == nil {
		rt.translations = map[translationKey]translationResult{}
	}
	rt.translations[k] = translationResult{t, err}
	return t, err
}

// overflowsAll reports whether every candidate of mr's model certainly cannot take the prompt:
// the request goes to the context-overflow models before any attempt.
func (rt *routeState) overflowsAll(mr *failover.Model) bool {
	if len(mr.Candidates) == 0 {
		return false
	}
	for _, c := range mr.Candidates {
		ch := rt.c.channels[c.Channel]
		if ch == nil {
			continue
		}
		m, ok := ch.Model(mr.Name)
		if !ok || !rt.overflows(m) {
			return false
		}
	}
	return true
}

// writeUnfit answers a request no channel could take, before any attempt (the planner's
// StopUnfit): a 400 naming what is missing.
func writeUnfit(w http.ResponseWriter, shape clientapi.Shape, model, reason string) {
	clientapi.WriteError(w, shape, http.StatusBadRequest, "invalid_request_error", "unsupported_capability",
		fmt.Sprintf("no channel of model %q can serve this request: %s", model, reason), 0)
}

// withCapabilities gives the attempt its model's capabilities on the channel, and the body
// routing translated for it already.
func (rt *routeState) withCapabilities(a *attempt) *attempt {
	m, ok := a.channel.Model(a.model)
	if !ok {
		return a
	}
	a.caps = m.Capabilities
	if speaksMessages(a.channel.Provider) || clientapi.IsMessagesPath(a.path) {
		if t, err := rt.translation(a.channel, m); err == nil {
			a.translated = t
		}
	}
	return a
}
