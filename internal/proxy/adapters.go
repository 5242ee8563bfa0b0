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
	"github.com/switchyard-io/switchyard/internal/provider/bedrock"
	"github.com/switchyard-io/switchyard/internal/provider/vertex"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// The channels of bedrock and vertex carry the Messages API over a cloud's own wire format: their
// attempts go through a provider.Adapter (NewRequest, ClassifyError, DecodeStream) instead of
// BaseURL + path, and what comes back is the Anthropic answer or its SSE events, which the
// anthropic path's translation, PII restore and stream-cut detection then handle unchanged.

// usesAdapter reports whether a provider's channels are served through an adapter.
func usesAdapter(p string) bool { return p == "bedrock" || p == "vertex" }

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

// buildAdapters makes the adapters of t's bedrock and vertex channels, reusing prev's where
// nothing changed. Called with cfgMu held.
func buildAdapters(t *routing.Table, prev map[string]*channelAdapter) map[string]*channelAdapter {
	out := map[string]*channelAdapter{}
	for i := range t.Channels {
		ch := &t.Channels[i]
		if !usesAdapter(ch.Provider) {
			continue
		}
		creds := t.Credentials[ch.ID()].Reveal()
		fp := adapterFingerprint(ch, creds)
		if old := prev[ch.ID()]; old != nil && old.fingerprint == fp {
			out[ch.ID()] = old
			continue
		}
		ca := &channelAdapter{fingerprint: fp}
		switch ch.Provider {
		case "bedrock":
			a, err := bedrock.New(bedrock.Config{Region: ch.Region, BaseURL: ch.BaseURL, Credentials: creds})
			ca.adapter, ca.err = a, err
		case "vertex":
			a, err := vertex.New(vertex.Config{Project: ch.Project, Region: ch.Region, BaseURL: ch.BaseURL, Credentials: creds})
			ca.adapter, ca.err = a, err
		}
		if ca.err != nil {
			ca.adapter = nil
		}
		out[ch.ID()] = ca
	}
	return out
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

// adapterFor is the channel's adapter in the current config: nil, nil for a channel that speaks
// plain HTTP to BaseURL.
func (s *Server) adapterFor(ch *routing.Channel) (provider.Adapter, error) {
	if !usesAdapter(ch.Provider) {
		return nil, nil
	}
	c := s.cfg.Load()
	if c == nil || c.adapters[ch.ID()] == nil {
		return nil, fmt.Errorf("channel %s has no %s adapter", ch.ID(), ch.Provider)
	}
	ca := c.adapters[ch.ID()]
	if ca.err != nil {
		return nil, ca.err
	}
	return ca.adapter, nil
}

// adapterRequest builds an attempt's upstream request through the adapter. Headers go on after
// it and only where it set none: a changed signed header would break Bedrock's signature.
func adapterRequest(ctx context.Context, ad provider.Adapter, a *attempt, up *upstream) (*http.Request, error) {
	req, err := ad.NewRequest(ctx, provider.Request{Model: a.upstream, Body: up.body, Stream: a.stream, Beta: betas(a.header)})
	if err != nil {
		return nil, err
	}
	fwd := http.Header{}
	copyRequestHeaders(fwd, a.header)
	// The Messages API's headers are the adapter's to carry (the body's anthropic_version, the
	// betas in its own way), and content negotiation is the cloud's.
	fwd.Del("Anthropic-Version")
	fwd.Del("Anthropic-Beta")
	fwd.Del("Accept")
	fwd.Set("X-Request-Id", a.requestID)
	for k, vv := range fwd {
		if _, set := req.Header[k]; !set {
			req.Header[k] = vv
		}
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

// adapterError reads a non-2xx answer of an adapter's channel and classifies it.
func adapterError(a *attempt, ad provider.Adapter, resp *http.Response) result {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	f := ad.ClassifyError(resp.StatusCode, resp.Header, b)
	return failureResult(a, &f, resp.StatusCode, resp.Header)
}

// failureResult turns an adapter's Failure into the attempt's result. The provider's text goes
// only into the access log (detail, redacted); a client sees ClientMessage alone: in a 4xx passed
// back, in the 503's last error, in a stream's in-band error.
func failureResult(a *attempt, f *provider.Failure, status int, header http.Header) result {
	if status == 0 {
		status = f.Status
	}
	r := result{outcome: f.Outcome, status: status, retryAfter: f.RetryAfter, header: header,
		detail: string(a.redact.bytes([]byte(f.Detail))), clientDetail: f.Code + ": " + f.ClientMessage}
	if f.Code == "" {
		r.clientDetail = f.ClientMessage
	}
	if f.Outcome == health.OutcomeClientError {
		if contextExceeded(f.ClientMessage) {
			r.errCode = "context_length_exceeded"
		}
		body := anthropic.ErrorBody(f.ClientType, f.ClientMessage)
		if a.wire != nil && a.wire.errorBody != nil {
			body = a.wire.errorBody(status, body)
		}
		r.body = a.redact.bytes(body)
		r.header = http.Header{"Content-Type": {"application/json"}}
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
