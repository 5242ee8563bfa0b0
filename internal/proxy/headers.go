package proxy

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// forwardedHeaders are the client headers that go upstream: content negotiation, the request
// headers the providers document (OpenAI's beta opt-ins and idempotency key, Anthropic's version
// and betas), the SDKs' own metadata (X-Stainless-*, below) and trace context. Everything else
// stays at the gateway: the client's credentials and cookies, the provider account it must not
// choose (OpenAI-Organization, OpenAI-Project), hop-by-hop headers, and whatever internal
// headers a client or a front proxy adds.
var forwardedHeaders = map[string]bool{
	"Accept": true, "User-Agent": true,
	"Openai-Beta": true, "Idempotency-Key": true,
	"Anthropic-Version": true, "Anthropic-Beta": true,
	"Traceparent": true, "Tracestate": true, "Baggage": true,
	"B3": true, "X-B3-Traceid": true, "X-B3-Spanid": true, "X-B3-Parentspanid": true, "X-B3-Sampled": true, "X-B3-Flags": true,
}

// copyRequestHeaders adds the forwarded client headers to dst where dst has none of that name
// (what the adapter set, its credentials and signed headers, stays), except those named in
// drop; a header named in Connection is hop-by-hop (RFC 9110, 7.6.1) whatever its name.
func copyRequestHeaders(dst, src http.Header, drop ...string) {
	conn := src["Connection"]
	for k, vv := range src {
		if !forwardedHeaders[k] && !strings.HasPrefix(k, "X-Stainless-") || (conn != nil && namedIn(conn, k)) || slices.Contains(drop, k) {
			continue
		}
		if _, set := dst[k]; !set {
			dst[k] = append([]string(nil), vv...)
		}
	}
}

// namedIn reports whether a comma-separated header value lists name.
func namedIn(values []string, name string) bool {
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), name) {
				return true
			}
		}
	}
	return false
}

// answerHeaders are the upstream answer's headers a client sees, with the X-Ratelimit-* family
// (the provider's limits, which clients pace themselves by). The provider account's headers
// (Openai-Organization, Openai-Project) and everything else stay at the gateway.
var answerHeaders = map[string]bool{"Content-Type": true, "Openai-Processing-Ms": true, "Openai-Version": true}

// writeAnswerHeaders sets the client's response headers: a few from upstream and Switchyard's own.
func writeAnswerHeaders(w http.ResponseWriter, a *attempt, up http.Header) {
	h := w.Header()
	for k, vv := range up {
		if answerHeaders[k] || strings.HasPrefix(k, "X-Ratelimit-") {
			h[k] = append([]string(nil), vv...)
		}
	}
	h.Set("X-Switchyard-Channel", a.channel.ID())
	h.Set("X-Switchyard-Model", a.model)
	h.Set("X-Switchyard-Attempts", strconv.Itoa(a.number))
}
