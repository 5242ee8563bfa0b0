package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
	"github.com/switchyard-io/switchyard/internal/provider/anthropicapi"
	"github.com/switchyard-io/switchyard/internal/provider/bedrock"
	"github.com/switchyard-io/switchyard/internal/provider/openai"
	"github.com/switchyard-io/switchyard/internal/provider/vertex"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Every channel's attempts go through its provider's provider.Adapter: NewRequest builds and
// authenticates the request, ClassifyError says what an error answer means, and the cloud
// adapters (bedrock, vertex; provider.StreamDecoder) read their stream framing as the Anthropic
// SSE events the anthropic path's translation, PII restore and stream-cut detection then handle
// unchanged. Adding a provider is its package and a case in newAdapter.

// isCloud reports whether a provider carries the Messages API over a cloud's own wire format:
// its stream is decoded by its adapter, its credentials are a cloud's (adapterSecrets), and it
// serves /messages alone.
func isCloud(p string) bool { return p == "bedrock" || p == "vertex" }

// channelAdapter is one channel's adapter, or why it could not be built, and what it was built
// from: a reload that leaves the fingerprint as it was keeps the adapter, so its credentials
// cache (SigV4 credentials, OAuth tokens) survives.
type channelAdapter struct {
	fingerprint string
	adapter     provider.Adapter
	err         error
}

// adapterFingerprint names everything an adapter is built from; the credentials only by their hash.
func adapterFingerprint(ch *routing.Channel, creds string) string {
	sum := sha256.Sum256([]byte(creds))
	return strings.Join([]string{ch.Provider, ch.Region, ch.Project, ch.BaseURL, hex.EncodeToString(sum[:])}, "\x00")
}

// buildAdapters makes the adapters of t's channels, reusing prev's where nothing changed.
// Called with cfgMu held.
func buildAdapters(t *routing.Table, prev map[string]*channelAdapter) map[string]*channelAdapter {
	out := make(map[string]*channelAdapter, len(t.Channels))
	for i := range t.Channels {
		ch := &t.Channels[i]
		creds := t.Credentials[ch.ID()].Reveal()
		fp := adapterFingerprint(ch, creds)
		if old := prev[ch.ID()]; old != nil && old.fingerprint == fp {
			out[ch.ID()] = old
			continue
		}
		ca := &channelAdapter{fingerprint: fp}
		ca.adapter, ca.err = newAdapter(ch, creds)
		if ca.err != nil {
			ca.adapter = nil
		}
		out[ch.ID()] = ca
	}
	return out
}

// newAdapter is the adapter of ch's provider, with the channel's credentials.
func newAdapter(ch *routing.Channel, creds string) (provider.Adapter, error) {
	switch ch.Provider {
	case "bedrock":
		return bedrock.New(bedrock.Config{Region: ch.Region, BaseURL: ch.BaseURL, Credentials: creds})
	case "vertex":
		return vertex.New(vertex.Config{Project: ch.Project, Region: ch.Region, BaseURL: ch.BaseURL, Credentials: creds})
	case "anthropic":
		return anthropicapi.New(anthropicapi.Config{BaseURL: ch.BaseURL, APIKey: creds}), nil
	case "azure-openai":
		return openai.New(openai.Config{BaseURL: ch.BaseURL, APIKey: creds, Azure: true}), nil
	}
	return openai.New(openai.Config{BaseURL: ch.BaseURL, APIKey: creds}), nil
}

// adapterSecrets are the parts of a cloud channel's credentials the redactor looks for in what
// comes back: the whole compiled value is no string a provider would echo.
func adapterSecrets(provider, creds string) []string {
	if provider == "bedrock" {
		if c, err := bedrock.ParseCredentials(creds); err == nil {
			return []string{c.SecretAccessKey, c.SessionToken}
		}
	}
	return nil // vertex: the private key never leaves the gateway, only short-lived tokens do
}

// get is the adapter of the channel ch it was built for. The attempt holds it from the config
// that routed it: a reload that removes or rebuilds the channel meanwhile does not fail it.
func (ca *channelAdapter) get(ch *routing.Channel) (provider.Adapter, error) {
	switch {
	case ca == nil:
		return nil, fmt.Errorf("channel %s has no %s adapter", ch.ID(), ch.Provider)
	case ca.err != nil:
		return nil, ca.err
	}
	return ca.adapter, nil
}

// adapterRequest builds an attempt's upstream request through the adapter. The client's
// forwarded headers go on after it and only where it set none: a changed signed header would
// break Bedrock's signature, and the credentials are the adapter's.
func adapterRequest(ctx context.Context, ad provider.Adapter, a *attempt, up *upstream) (*http.Request, error) {
	req, err := ad.NewRequest(ctx, provider.Request{Path: up.path, Model: a.upstream, Body: up.body, Stream: a.stream,
		Version: up.anthropicVersion, Beta: betas(a.header)})
	if err != nil {
		return nil, err
	}
	// The Messages API's headers are the adapter's to carry (the anthropic channel's headers, a
	// cloud's body field and betas in its own way); an OpenAI-compatible server has no use for
	// them. Content negotiation is a cloud's: it answers in its own framing.
	if _, decodes := ad.(provider.StreamDecoder); decodes {
		copyRequestHeaders(req.Header, a.header, "Anthropic-Version", "Anthropic-Beta", "Accept")
	} else {
		copyRequestHeaders(req.Header, a.header, "Anthropic-Version", "Anthropic-Beta")
	}
	if _, set := req.Header["X-Request-Id"]; !set {
		req.Header["X-Request-Id"] = []string{a.requestID}
	}
	return req, nil
}

// betas are the client's anthropic-beta values.
func betas(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Anthropic-Beta") {
		for b := range strings.SplitSeq(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				out = append(out, b)
			}
		}
	}
	return out
}

// adapterRequestFailure is the result of an attempt whose request could not be built: the
// credentials could not be had (a channel failure), the context ended, or the body is not one
// the adapter can carry.
func adapterRequestFailure(ctx context.Context, a *attempt, err error) result {
	var f *provider.Failure
	switch {
	case errors.As(err, &f):
		return failureResult(a, f, 0, nil)
	case context.Cause(ctx) != nil:
		return transportFailure(ctx, err, "fetching the channel's credentials")
	}
	return translationFailure(err)
}

// adapterError reads a non-2xx answer and has the channel's adapter classify it. The body is
// redacted before anything reads it: a summary cut in the middle of a key could not be.
func adapterError(a *attempt, ad provider.Adapter, resp *http.Response) result {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	f := ad.ClassifyError(resp.StatusCode, resp.Header, a.redact.bytes(b))
	return failureResult(a, &f, resp.StatusCode, resp.Header)
}

// failureResult turns an adapter's Failure into the attempt's result. The provider's text goes
// only into the access log (detail, redacted); a client sees ClientMessage alone (in a 4xx passed
// back, in the 503's last error, in a stream's in-band error), or, for a failure that keeps the
// provider's body (its own mistake, a rate limit on a direct channel), that body, redacted and in
// the client's API.
func failureResult(a *attempt, f *provider.Failure, status int, header http.Header) result {
	if status == 0 {
		status = f.Status
	}
	r := result{outcome: f.Outcome, status: status, retryAfter: f.RetryAfter, header: header,
		detail: string(a.redact.bytes([]byte(f.Detail)))}
	switch {
	case f.ClientMessage == "":
	case f.Code == "":
		r.clientDetail = f.ClientMessage
	default:
		r.clientDetail = f.Code + ": " + f.ClientMessage
	}
	if f.Body != nil {
		r.body = a.redact.bytes(f.Body)
	}
	if f.Outcome != health.OutcomeClientError {
		return r
	}
	r.errCode = f.Code
	if contextExceeded(f.ClientMessage) {
		r.errCode = "context_length_exceeded"
	}
	if f.Body == nil {
		r.body = a.redact.bytes(anthropic.ErrorBody(f.ClientType, f.ClientMessage))
		r.header = http.Header{"Content-Type": {"application/json"}}
	}
	if a.wire != nil && a.wire.errorBody != nil {
		r.body = a.wire.errorBody(status, r.body)
	}
	return r
}

// contextExceeded reports whether a Claude refusal says the prompt does not fit the model's
// context: Anthropic's wording (on Vertex too) and Bedrock's "Input is too long for requested
// model".
func contextExceeded(msg string) bool {
	e := anthropic.UpstreamError{Type: "invalid_request_error", Message: msg}
	return e.ContextExceeded() || strings.Contains(strings.ToLower(msg), "input is too long")
}

// sseResponse is a streamed answer of an adapter's channel as the anthropic path sees one: the
// adapter's Anthropic events as SSE bytes, the Content-Type a client expects.
func sseResponse(resp *http.Response, events provider.EventReader) *http.Response {
	out := *resp
	out.Header = resp.Header.Clone()
	out.Header.Set("Content-Type", "text/event-stream; charset=utf-8")
	out.Header.Del("Content-Length")
	out.Body = &eventBytes{events: events}
	return &out
}

// eventBytes reads an EventReader as the Anthropic API's SSE stream. The reader's end comes back
// from Read as it is: io.EOF after a complete stream, a *provider.Failure for a stream the
// provider broke (relayStream classifies it), a transport error unchanged.
type eventBytes struct {
	events provider.EventReader
	buf    []byte
	err    error
}

func (e *eventBytes) Read(p []byte) (int, error) {
	for len(e.buf) == 0 {
		if e.err != nil {
			return 0, e.err
		}
		ev, err := e.events.Next()
		if err != nil {
			e.err = err
			continue
		}
		e.buf = ev.AppendSSE(e.buf[:0])
	}
	n := copy(p, e.buf)
	e.buf = e.buf[n:]
	return n, nil
}

func (e *eventBytes) Close() error { return e.events.Close() }

// streamFailure is how relayStream reads the end of an adapter's stream that is a provider's
// failure; ok is false for any other error.
func streamFailure(a *attempt, err error) (result, bool) {
	var f *provider.Failure
	if !errors.As(err, &f) {
		return result{}, false
	}
	return failureResult(a, f, 0, nil), true
}
