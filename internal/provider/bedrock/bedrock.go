// Package bedrock is the wire adapter for Claude on Amazon Bedrock Runtime: a provider.Adapter.
//
// It speaks InvokeModel (POST /model/{modelId}/invoke) and InvokeModelWithResponseStream
// (POST /model/{modelId}/invoke-with-response-stream). Both take the Anthropic Messages body
// nearly unchanged (anthropic_version "bedrock-2023-05-31" in the body, no "model" or "stream",
// the model id in the path, betas as the body's anthropic_beta), and a non-streamed answer is the
// Anthropic Messages answer as it is. A streamed answer comes in AWS's binary event-stream
// framing: each "chunk" event carries, base64 in its JSON "bytes", one Anthropic stream event,
// which the EventReader yields as the SSE event the Anthropic API would have sent. Converse is
// not used: it is a second, lossy translation (see docs/providers.md).
//
// Requests are signed with SigV4 by the AWS SDK's signer (service "bedrock"); the event-stream
// framing is decoded by the SDK's eventstream package; the default endpoint is the SDK's own
// endpoint resolver's for the region. Credentials come from the channel's Secret or, without
// one, the SDK's default chain (web identity / IRSA in a pod, environment, shared config, ECS
// or EC2 roles), cached and refreshed before expiry by aws.CredentialsCache.
//
// The package never logs and never puts a credential into an error.
package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/smithy-go/encoding/httpbinding"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
)

const (
	// AnthropicVersion is the anthropic_version Bedrock requires in the body.
	AnthropicVersion = "bedrock-2023-05-31"
	// SigningName is the SigV4 service name of Bedrock Runtime.
	SigningName = "bedrock"
	// EventStreamContentType is the Content-Type of a streamed answer.
	EventStreamContentType = "application/vnd.amazon.eventstream"
	// invocationMetricsKey is the field Bedrock adds to message_stop; the Anthropic API has none.
	invocationMetricsKey = "amazon-bedrock-invocationMetrics"
)

// Config is one channel's Bedrock settings.
type Config struct {
	// Region is the AWS region of the endpoint and of the SigV4 scope (spec.region).
	Region string
	// BaseURL replaces the endpoint the SDK derives from Region (a VPC endpoint, a test mock).
	BaseURL string
	// Credentials is the channel's compiled Secret (SecretValue's form); "" uses the default chain.
	Credentials string
	// Provider, when set, is where credentials come from instead (tests, a shared chain).
	Provider aws.CredentialsProvider
	// Now is the signing clock (default time.Now).
	Now func() time.Time
}

// Adapter is the provider.Adapter for one Bedrock channel.
type Adapter struct {
	base   *url.URL
	region string
	creds  aws.CredentialsProvider
	signer *v4.Signer
	now    func() time.Time
}

var _ provider.Adapter = (*Adapter)(nil)

// New builds a channel's adapter. It does not fetch credentials: the first request does.
func New(cfg Config) (*Adapter, error) {
	if err := checkRegion(cfg.Region); err != nil {
		return nil, err
	}
	base, err := Endpoint(cfg.Region, cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	creds := cfg.Provider
	switch {
	case creds != nil:
	case cfg.Credentials != "":
		c, err := ParseCredentials(cfg.Credentials)
		if err != nil {
			return nil, err
		}
		creds = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken))
	default:
		creds = defaultChain()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Adapter{base: base, region: cfg.Region, creds: creds, signer: v4.NewSigner(), now: now}, nil
}

// Endpoint is the API root requests go to: baseURL when set, else the endpoint the SDK's own
// resolver gives for the region (bedrock-runtime.<region>.<partition's DNS suffix>).
func Endpoint(region, baseURL string) (*url.URL, error) {
	raw := baseURL
	if raw == "" {
		ep, err := bedrockruntime.NewDefaultEndpointResolverV2().ResolveEndpoint(context.Background(),
			bedrockruntime.EndpointParameters{Region: aws.String(region)})
		if err != nil {
			return nil, fmt.Errorf("spec.region: no Bedrock Runtime endpoint for region %q: %w", region, err)
		}
		u := ep.URI
		return &u, nil
	}
	return provider.ParseBaseURL(raw)
}

var (
	defaultOnce  sync.Once
	defaultCreds aws.CredentialsProvider
)

// defaultChain is the process's one default credentials chain, shared by every channel without
// a Secret: they all are the pod's identity, so one cache (one STS call per refresh) serves all.
func defaultChain() aws.CredentialsProvider {
	defaultOnce.Do(func() {
		p, err := LoadDefaultCredentials(context.Background())
		if err != nil {
			defaultCreds = failingProvider{err}
			return
		}
		defaultCreds = p
	})
	return defaultCreds
}

// LoadDefaultCredentials is the SDK's default chain (config.LoadDefaultConfig): environment,
// web identity (IRSA, EKS Pod Identity), shared config and credentials files, ECS and EC2 roles,
// already wrapped in the SDK's credentials cache.
func LoadDefaultCredentials(ctx context.Context) (aws.CredentialsProvider, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS default configuration: %w", err)
	}
	if cfg.Credentials == nil {
		return nil, errors.New("the AWS default credentials chain found no credentials")
	}
	return cfg.Credentials, nil
}

type failingProvider struct{ err error }

func (f failingProvider) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, f.err
}

// NewRequest builds the signed InvokeModel or InvokeModelWithResponseStream request.
//
// Headers added to the request afterwards are not signed, which Bedrock accepts; changing one
// NewRequest set (Host, Content-Type, Content-Length, X-Amz-*) breaks the signature.
func (a *Adapter) NewRequest(ctx context.Context, r provider.Request) (*http.Request, error) {
	if r.Model == "" {
		return nil, errors.New("bedrock: no model id")
	}
	set := map[string]any{"anthropic_version": AnthropicVersion}
	if len(r.Beta) > 0 {
		set["anthropic_beta"] = r.Beta
	}
	body, err := provider.EditBody(r.Body, set, "model", "stream")
	if err != nil {
		return nil, err
	}
	op := "/invoke"
	if r.Stream {
		op = "/invoke-with-response-stream"
	}
	u := *a.base
	u.Path = a.base.Path + "/model/" + r.Model + op
	u.RawPath = a.base.EscapedPath() + "/model/" + httpbinding.EscapePath(r.Model, true) + op
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bedrock: building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.Stream {
		req.Header.Set("X-Amzn-Bedrock-Accept", "application/json")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	creds, err := a.creds.Retrieve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		f := credentialsFailure(err)
		return nil, &f
	}
	sum := sha256.Sum256(body)
	if err := a.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), SigningName, a.region, a.now()); err != nil {
		f := credentialsFailure(err)
		return nil, &f
	}
	return req, nil
}

func credentialsFailure(err error) provider.Failure {
	return provider.Failure{Outcome: health.OutcomeServerError, Code: "CredentialsUnavailable",
		Detail:     "bedrock: AWS credentials unavailable: " + provider.Summarize(err.Error()),
		ClientType: provider.ClientTypeFor(health.OutcomeServerError), ClientMessage: provider.GenericMessage(health.OutcomeServerError)}
}

// ClassifyError reads a Bedrock error answer. The error name comes from the X-Amzn-ErrorType
// header, else the body's "__type", else its "code" (the SDK's restjson1 order), without the
// namespace prefix or URI suffix.
func (a *Adapter) ClassifyError(status int, header http.Header, body []byte) provider.Failure {
	code, msg := errorInfo(header, body)
	f := classify(code, msg, status)
	if f.Outcome == health.OutcomeRateLimited {
		f.RetryAfter = provider.ParseRetryAfter(header.Get("Retry-After"), a.now())
	}
	return f
}

func errorInfo(header http.Header, body []byte) (code, msg string) {
	var info struct {
		Type    string `json:"__type"`
		Code    any    `json:"code"`
		Message string `json:"message"`
		Msg     string `json:"Message"`
	}
	_ = json.Unmarshal(body, &info)
	code = header.Get("X-Amzn-ErrorType")
	if code == "" {
		code = info.Type
	}
	if c, ok := info.Code.(string); code == "" && ok {
		code = c
	}
	if i := strings.Index(code, ":"); i >= 0 {
		code = code[:i]
	}
	if i := strings.Index(code, "#"); i >= 0 {
		code = code[i+1:]
	}
	msg = info.Message
	if msg == "" {
		msg = info.Msg
	}
	return code, msg
}

// classify is what a Bedrock error name means; status is the HTTP status (0 for an exception
// event in a stream, where StreamState turns it into a cut stream once events were sent).
func classify(code, msg string, status int) provider.Failure {
	// Stream exceptions are named in lowerCamel (throttlingException), answers in UpperCamel.
	name := code
	if name != "" {
		name = strings.ToUpper(name[:1]) + name[1:]
	}
	f := provider.Failure{Status: status, Code: name}
	withheld := false
	switch name {
	case "ThrottlingException", "ModelNotReadyException":
		f.Outcome = health.OutcomeRateLimited
	case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
		"ExpiredTokenException", "IncompleteSignatureException", "MissingAuthenticationTokenException",
		"InvalidClientTokenId", "SignatureDoesNotMatch":
		// The channel's credentials or its IAM policy: the channel is broken, and the text
		// names the account, role and model ARNs.
		f.Outcome, withheld = health.OutcomeServerError, true
	case "ServiceQuotaExceededException":
		// The account's quota, not this request's rate: like OpenAI's insufficient_quota, a
		// failure of the channel; another account may serve.
		f.Outcome, withheld = health.OutcomeServerError, true
	case "ResourceNotFoundException", "UnknownOperationException":
		f.Outcome = health.OutcomeMisconfigured
	case "ValidationException":
		f.Outcome = health.OutcomeClientError
		if strings.Contains(msg, "model identifier is invalid") || strings.Contains(msg, "on-demand throughput") {
			// A wrong upstreamModel (or a model that needs an inference profile id): the
			// channel's configuration, not the caller's request.
			f.Outcome = health.OutcomeMisconfigured
		}
	case "ConflictException":
		f.Outcome = health.OutcomeClientError
	case "ModelTimeoutException":
		f.Outcome = health.OutcomeTimeout
	case "InternalServerException", "ServiceUnavailableException", "ModelErrorException", "ModelStreamErrorException":
		f.Outcome = health.OutcomeServerError
	default:
		if status == 0 {
			f.Outcome = health.OutcomeServerError
		} else {
			f.Outcome = health.OutcomeFromStatus(status)
			withheld = status == http.StatusUnauthorized || status == http.StatusForbidden
		}
	}
	where := "exception in the stream"
	if status != 0 {
		where = fmt.Sprintf("HTTP %d", status)
	}
	if withheld {
		f.Detail = fmt.Sprintf("bedrock %s %s: the provider rejected the channel's credentials or account", where, name)
		if name == "ServiceQuotaExceededException" {
			f.Detail = fmt.Sprintf("bedrock %s %s: the account's service quota is exhausted", where, name)
		}
	} else {
		f.Detail = fmt.Sprintf("bedrock %s %s: %s", where, name, provider.Summarize(msg))
	}
	f.ClientType = provider.ClientTypeFor(f.Outcome)
	if f.Outcome == health.OutcomeClientError && msg != "" {
		f.ClientMessage = msg
	} else {
		f.ClientMessage = provider.GenericMessage(f.Outcome)
	}
	return f
}

// DecodeStream reads InvokeModelWithResponseStream's event stream as Anthropic SSE events.
func (a *Adapter) DecodeStream(resp *http.Response) (provider.EventReader, error) {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, EventStreamContentType) {
		resp.Body.Close()
		f := provider.Failure{Outcome: health.OutcomeServerError, Status: resp.StatusCode, Code: "UnexpectedContentType",
			Detail:     fmt.Sprintf("bedrock: a streamed answer with Content-Type %q, want %s", ct, EventStreamContentType),
			ClientType: provider.ClientTypeFor(health.OutcomeServerError), ClientMessage: provider.GenericMessage(health.OutcomeServerError)}
		return nil, &f
	}
	return &streamReader{body: resp.Body, src: &readErr{r: resp.Body}, dec: eventstream.NewDecoder()}, nil
}

// readErr remembers the transport's own read error, so a reset or a timeout is told apart from
// framing the decoder could not read.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = err
	}
	return n, err
}

type streamReader struct {
	body  io.ReadCloser
	src   *readErr
	dec   *eventstream.Decoder
	buf   []byte
	state provider.StreamState
	err   error
	once  sync.Once
}

func (s *streamReader) Close() error {
	var err error
	s.once.Do(func() { err = s.body.Close() })
	return err
}

func (s *streamReader) Next() (provider.Event, error) {
	if s.err != nil {
		return provider.Event{}, s.err
	}
	ev, err := s.next()
	if err != nil {
		s.err = err
	}
	return ev, err
}

func (s *streamReader) next() (provider.Event, error) {
	for {
		msg, err := s.dec.Decode(s.src, s.buf[:0])
		if err != nil {
			switch {
			case s.src.err != nil:
				return provider.Event{}, fmt.Errorf("bedrock: reading the event stream: %w", s.src.err)
			case errors.Is(err, io.EOF):
				return provider.Event{}, s.state.End()
			}
			// Framing the decoder cannot read (bad CRC, a frame cut short) cannot be
			// resynchronised: the stream is over.
			return provider.Event{}, s.state.Fail(provider.Failure{Outcome: health.OutcomeServerError, Code: "MalformedEventStream",
				Detail: "bedrock: undecodable event-stream framing: " + provider.Summarize(err.Error())})
		}
		s.buf = msg.Payload
		switch header(msg, eventstreamapi.MessageTypeHeader) {
		case eventstreamapi.EventMessageType:
			if header(msg, eventstreamapi.EventTypeHeader) != "chunk" {
				continue // an event type this version does not know: not part of the answer
			}
			ev, ok := chunkEvent(msg.Payload)
			if !ok {
				continue // one malformed event is passed over, as in an SSE stream
			}
			if err := s.state.Observe(ev); err != nil {
				return provider.Event{}, err
			}
			return ev, nil
		case eventstreamapi.ExceptionMessageType:
			code, m := errorInfo(http.Header{}, msg.Payload)
			if t := header(msg, eventstreamapi.ExceptionTypeHeader); t != "" {
				code = t
			}
			return provider.Event{}, s.state.Fail(classify(code, m, 0))
		case eventstreamapi.ErrorMessageType:
			f := classify(header(msg, eventstreamapi.ErrorCodeHeader), header(msg, eventstreamapi.ErrorMessageHeader), 0)
			return provider.Event{}, s.state.Fail(f)
		default:
			return provider.Event{}, s.state.Fail(provider.Failure{Outcome: health.OutcomeServerError, Code: "MalformedEventStream",
				Detail: "bedrock: an event-stream message without a known :message-type"})
		}
	}
}

func header(m eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}

// chunkEvent decodes a chunk's payload, {"bytes":"<base64 of one Anthropic event's JSON>"}.
func chunkEvent(payload []byte) (provider.Event, bool) {
	var part struct {
		Bytes []byte `json:"bytes"` // encoding/json decodes base64 into []byte
	}
	if json.Unmarshal(payload, &part) != nil || len(part.Bytes) == 0 {
		return provider.Event{}, false
	}
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(part.Bytes, &head) != nil || head.Type == "" {
		return provider.Event{}, false
	}
	data := part.Bytes
	if head.Type == "message_stop" && bytes.Contains(data, []byte(invocationMetricsKey)) {
		if d, err := provider.EditBody(data, nil, invocationMetricsKey); err == nil {
			data = d
		}
	}
	return provider.Event{Type: head.Type, Data: data}, true
}
