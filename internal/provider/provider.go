// Package provider is the contract between the proxy and the wire adapters, one per provider:
// openai and azure-openai (provider/openai), anthropic (provider/anthropicapi), and the cloud
// adapters that carry Anthropic's Messages API to Claude on another cloud (bedrock, vertex).
//
// An adapter builds an attempt's upstream request from the body in the API the channel speaks
// (the proxy's translation decides which: the OpenAI API for openai channels, the Anthropic
// Messages JSON for the others), authenticates it, and says what an error answer means. The
// cloud adapters also decode their stream framing (StreamDecoder): what comes back out of them
// is an Anthropic Messages answer or the same SSE events the Anthropic API sends. A cloud
// adapter only does what differs on the wire: where the model id goes, the anthropic_version the
// cloud wants, authentication (SigV4, OAuth bearer tokens), the stream framing, and what the
// cloud's errors mean.
//
// An attempt with an Adapter, as the proxy runs it:
//
//	req, err := a.NewRequest(ctx, provider.Request{Path: path, Model: upstream, Body: body, Stream: stream})
//	// err: a *Failure (credentials could not be had: a channel failure) or a malformed body
//	resp, err := transport.RoundTrip(req)          // the proxy's own transport, timeouts and all
//	if resp.StatusCode >= 300 {
//		f := a.ClassifyError(resp.StatusCode, resp.Header, body) // outcome, Retry-After, client text
//	}
//	if d, ok := a.(provider.StreamDecoder); ok && stream {
//		events, err := d.DecodeStream(resp)        // Anthropic SSE events, whatever the framing
//		for { ev, err := events.Next(); ... w.Write(ev.AppendSSE(nil)) }
//	}                                              // otherwise resp.Body is the API's answer or SSE
//
// An adapter never decides about health, retries or failover (the proxy and internal/health do),
// never logs, and never puts a credential or the provider's text about one into an error a
// client could see: Failure.ClientMessage (and Failure.Body, the caller's own mistake) is the
// only text meant for clients.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

// Adapter speaks one provider's wire format. Implementations are safe for concurrent use; one is
// built per channel (it holds the channel's credentials and their cache).
type Adapter interface {
	// NewRequest builds the upstream request of one attempt, authenticated and ready for the
	// proxy's transport. It may block to fetch or refresh credentials, never past ctx.
	NewRequest(ctx context.Context, r Request) (*http.Request, error)
	// ClassifyError says what a non-2xx answer means. body is (a prefix of) the answer's body.
	ClassifyError(status int, header http.Header, body []byte) Failure
}

// StreamDecoder is an Adapter whose provider frames a stream its own way (Bedrock's event
// stream, Vertex's): it reads a 2xx answer to a streamed request as Anthropic SSE events. The
// streams of an adapter without it are the API's own SSE, read as they come.
type StreamDecoder interface {
	DecodeStream(resp *http.Response) (EventReader, error)
}

// Request is one attempt's request, in the API the channel speaks.
type Request struct {
	// Path is the API path after /v1 (/chat/completions, /embeddings, /messages,
	// /messages/count_tokens, ...). The cloud adapters serve /messages only.
	Path string
	// Model is the upstream model id (the channel's upstreamModel): a Bedrock model or
	// inference-profile id or ARN, or a Vertex model name. The direct adapters find it in Body.
	Model string
	// Body is the request JSON: the OpenAI API's for openai channels, the Anthropic Messages
	// JSON for the others. Fields the adapter does not know pass through unchanged; the cloud
	// adapters move "model" and "stream" to where the cloud wants them.
	Body []byte
	// Stream asks for a streamed answer.
	Stream bool
	// Version is the anthropic-version the client asked for ("": the adapter's default).
	Version string
	// Beta are the client's anthropic-beta values, carried the way the provider takes them.
	Beta []string
}

// Event is one Anthropic SSE event: "event: <Type>\ndata: <Data>\n\n".
type Event struct {
	Type string // message_start, content_block_delta, ..., message_stop, ping
	Data []byte // the event's JSON
}

// AppendSSE appends the event in the Anthropic API's SSE form.
func (e Event) AppendSSE(b []byte) []byte {
	b = append(b, "event: "...)
	b = append(b, e.Type...)
	b = append(b, "\ndata: "...)
	b = append(b, e.Data...)
	return append(b, "\n\n"...)
}

// EventReader yields a streamed answer's events in order.
//
// Next returns io.EOF after message_stop once the upstream closed cleanly. A stream that ends
// any other way returns a *Failure (a provider error event, an exception, a stream closed
// before message_stop, undecodable framing) or the transport's read error, unchanged (wrapped
// with %w), so the proxy tells its own timeouts and a client gone away from a reset.
type EventReader interface {
	Next() (Event, error)
	// Close releases the response body; safe to call more than once.
	Close() error
}

// Failure is a classified provider error: an error answer, an error event in a stream, or
// credentials that could not be had.
type Failure struct {
	Outcome health.Outcome
	// RetryAfter is the wait the provider asked for (Retry-After), 0 if none.
	RetryAfter time.Duration
	// Status is the HTTP status of an error answer, 0 for one that arrived in a stream.
	Status int
	// Code is the provider's own error name (ThrottlingException, RESOURCE_EXHAUSTED,
	// overloaded_error): for logs, metrics and the journal.
	Code string
	// Detail says what happened, for logs and the journal. It never quotes a credential but may
	// quote the provider's message (account or role names), so it is not for clients.
	Detail string
	// ClientType and ClientMessage are what a client may be told, as an Anthropic error
	// (type: invalid_request_error, rate_limit_error, overloaded_error, api_error, ...).
	// ClientMessage is the provider's message only for the caller's own mistakes (a 4xx the
	// request caused); otherwise a fixed text that says nothing about the channel.
	ClientType    string
	ClientMessage string
	// AfterFirstEvent: the failure came in a stream after at least one event was read.
	AfterFirstEvent bool
	// Body, for the caller's own mistake (a client error) or a rate limit on a direct channel,
	// is the provider's error body in the API the request was sent in: the client is shown it
	// (redacted, in the client's API) instead of one built from ClientType and ClientMessage.
	Body []byte
}

func (f *Failure) Error() string {
	if f.Detail != "" {
		return f.Detail
	}
	return fmt.Sprintf("%s %s", f.Outcome, f.Code)
}

// ClientTypeFor is the Anthropic error type a client is shown for a failure of class o.
func ClientTypeFor(o health.Outcome) string {
	switch o {
	case health.OutcomeRateLimited:
		return "rate_limit_error"
	case health.OutcomeClientError:
		return "invalid_request_error"
	case health.OutcomeTimeout:
		return "timeout_error"
	case health.OutcomeServerError, health.OutcomeStreamCut:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

// GenericMessage is the client text for failures whose provider message is withheld.
func GenericMessage(o health.Outcome) string {
	switch o {
	case health.OutcomeRateLimited:
		return "The upstream provider is rate limiting requests; try again later."
	case health.OutcomeTimeout:
		return "The upstream provider did not answer in time."
	case health.OutcomeStreamCut:
		return "The upstream provider ended the stream before it was complete."
	default:
		return "The upstream provider could not serve the request."
	}
}

// MaxRetryAfter caps the wait a Retry-After may ask for: a provider that asks for more than a day
// is still not tried again for a day, not forever.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After value: delta-seconds or an HTTP date (relative to now),
// capped at MaxRetryAfter. It returns 0 for a missing, malformed or past value. It is the one
// parser of Retry-After: the proxy's direct channels and the adapters use it.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if !(n > 0) { // NaN too
			return 0
		}
		if n >= MaxRetryAfter.Seconds() {
			return MaxRetryAfter
		}
		d = time.Duration(n * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return max(0, min(d, MaxRetryAfter))
}

// ParseBaseURL parses a channel's baseURL (or the one an adapter derived from its region): an
// http:// or https:// URL with a host, no credentials, query or fragment, without a trailing
// slash. The message names the field and never quotes the value, which may carry a password.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("spec.baseURL: want an http:// or https:// URL with a host and no credentials, query or fragment")
	}
	return u, nil
}
