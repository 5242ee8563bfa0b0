package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"golang.org/x/oauth2"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
	"github.com/switchyard-io/switchyard/internal/provider/anthropicapi"
	"github.com/switchyard-io/switchyard/internal/provider/bedrock"
	"github.com/switchyard-io/switchyard/internal/provider/vertex"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// TestAnthropicErrorsOneClassifier: an Anthropic error means the same whichever way it reached
// the gateway: as a direct anthropic channel's answer (what do ends up with), as Claude on
// Vertex's answer, as an error event at the start of a Vertex stream, and inside Bedrock's event
// stream. billing_error is the gateway's account out of credit (fail over), a 504 timeout_error
// a timeout, on every path.
func TestAnthropicErrorsOneClassifier(t *testing.T) {
	vx, err := vertex.New(vertex.Config{Project: "switchyard-test", Region: "us-east5",
		TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "t"})})
	if err != nil {
		t.Fatal(err)
	}
	br, err := bedrock.New(bedrock.Config{Region: "us-east-1", Provider: aws.AnonymousCredentials{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status  int
		typ     string
		message string
		want    health.Outcome
		errCode string // the direct channel's, for a client error
	}{
		{529, "overloaded_error", "Overloaded", health.OutcomeServerError, ""},
		{500, "api_error", "Internal server error", health.OutcomeServerError, ""},
		{429, "rate_limit_error", "slow down", health.OutcomeRateLimited, ""},
		{401, "authentication_error", "invalid x-api-key sk-ant-****", health.OutcomeServerError, ""},
		{403, "permission_error", "no access to this model", health.OutcomeServerError, ""},
		{402, "billing_error", "Your credit balance is too low", health.OutcomeServerError, ""},
		{404, "not_found_error", "model: claude-nope", health.OutcomeMisconfigured, ""},
		{504, "timeout_error", "Request timed out", health.OutcomeTimeout, ""},
		{400, "invalid_request_error", "max_tokens: 0 < 1", health.OutcomeClientError, "invalid_request_error"},
		{413, "request_too_large", "Request exceeds the maximum size", health.OutcomeClientError, "request_too_large"},
		{400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum", health.OutcomeClientError, "context_length_exceeded"},
	} {
		t.Run(c.typ+" "+c.message, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": c.typ, "message": c.message}})

			r, errCode := directOutcome(c.status, body)
			if r != c.want || (c.want == health.OutcomeClientError && errCode != c.errCode) {
				t.Errorf("direct anthropic: %s %q, want %s %q", r, errCode, c.want, c.errCode)
			}
			if f := vx.ClassifyError(c.status, http.Header{}, body); f.Outcome != c.want || f.Code != c.typ {
				t.Errorf("vertex answer: %s %s, want %s", f.Outcome, f.Code, c.want)
			}
			vs := provider.NewSSEReader(io.NopCloser(strings.NewReader("event: error\ndata: " + string(body) + "\n\n")))
			if f := firstFailure(t, vs); f.Outcome != c.want || f.Code != c.typ {
				t.Errorf("vertex stream: %s %s, want %s", f.Outcome, f.Code, c.want)
			}
			bs, err := br.DecodeStream(&http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {bedrock.EventStreamContentType}},
				Body: io.NopCloser(bytes.NewReader(bedrockChunk(t, body)))})
			if err != nil {
				t.Fatal(err)
			}
			if f := firstFailure(t, bs); f.Outcome != c.want || f.Code != c.typ {
				t.Errorf("bedrock stream: %s %s, want %s", f.Outcome, f.Code, c.want)
			}
		})
	}
}

// directOutcome is what do makes of a direct anthropic channel's error answer: the adapter's
// classification, as the attempt's result.
func directOutcome(status int, body []byte) (health.Outcome, string) {
	a := &attempt{channel: &routing.Channel{Provider: "anthropic"}}
	ad := anthropicapi.New(anthropicapi.Config{})
	resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}
	r := adapterError(a, ad, resp)
	return r.outcome, r.errCode
}

func firstFailure(t *testing.T, events provider.EventReader) *provider.Failure {
	t.Helper()
	_, err := events.Next()
	var f *provider.Failure
	if !errors.As(err, &f) {
		t.Fatalf("stream: %v, want a *provider.Failure", err)
	}
	return f
}

// bedrockChunk is an Anthropic event as Bedrock streams it: a chunk of AWS's event stream.
func bedrockChunk(t *testing.T, event []byte) []byte {
	t.Helper()
	payload, _ := json.Marshal(map[string][]byte{"bytes": event})
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("event"))
	h.Set(":event-type", eventstream.StringValue("chunk"))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: h, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
