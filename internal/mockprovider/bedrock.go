package mockprovider

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// BedrockOptions configure a Bedrock mock.
type BedrockOptions struct {
	// Name identifies the mock in answers and the NameHeader (default "bedrock-mock").
	Name string
	// Region is the SigV4 scope region requests must be signed for (default us-east-1).
	Region string
	// Credentials are the keys the mock accepts, by access key id; a request signed with any
	// other key, or with the right key id and a wrong secret or session token, is refused.
	Credentials []aws.Credentials
	// MaxSkew bounds how far a request's X-Amz-Date may be from Now (default 5 minutes, as AWS).
	MaxSkew time.Duration
	// Now is the mock's clock (default time.Now).
	Now func() time.Time
}

// Bedrock is a mock Amazon Bedrock Runtime for Claude: InvokeModel and
// InvokeModelWithResponseStream, POST /model/{modelId}/invoke[-with-response-stream] (under any
// prefix). Every request's SigV4 signature is verified by re-signing it with the SDK's signer
// and the known credentials; answers are the Anthropic Messages body, streams the AWS
// event-stream framing encoded by the SDK's encoder, one "chunk" event per Anthropic event.
//
// Behaviours (SetBehavior by model id, or X-Mock-Behavior per request, see ParseCloudBehavior)
// play today's misbehaviours in Bedrock's terms: a status is answered with Bedrock's exception
// for it (429 ThrottlingException, 503 ServiceUnavailableException, ...), stream_error ends a
// stream with an exception event (modelStreamErrorException, throttlingException, ...).
type Bedrock struct {
	cloudModels
	opts   BedrockOptions
	seq    atomic.Int64
	signer *v4.Signer
	// Refused counts requests refused for their signature or credentials.
	refused atomic.Int64
}

// NewBedrock returns a Bedrock mock.
func NewBedrock(opts BedrockOptions) *Bedrock {
	if opts.Name == "" {
		opts.Name = "bedrock-mock"
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.MaxSkew == 0 {
		opts.MaxSkew = 5 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Bedrock{cloudModels: newCloudModels(), opts: opts, signer: v4.NewSigner()}
}

// Refused is how many requests the mock refused for their signature or credentials.
func (m *Bedrock) Refused() int { return int(m.refused.Load()) }

func (m *Bedrock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(NameHeader, m.opts.Name)
	w.Header().Set("X-Amzn-Requestid", fmt.Sprintf("req-%d", m.seq.Add(1)))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		bedrockError(w, http.StatusBadRequest, "ValidationException", "Could not read the request body.")
		return
	}
	model, stream, ok := bedrockPath(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		bedrockError(w, http.StatusNotFound, "UnknownOperationException", "")
		return
	}
	b, source, berr := m.record(r, model, body)
	if code, msg := m.verify(r, body); code != "" {
		m.refused.Add(1)
		bedrockError(w, http.StatusForbidden, code, msg)
		return
	}
	if berr != nil {
		bedrockError(w, http.StatusBadRequest, "ValidationException", "mockprovider: invalid "+BehaviorHeader+": "+berr.Error())
		return
	}
	var req claudeRequest
	var raw map[string]json.RawMessage
	switch {
	case json.Unmarshal(body, &raw) != nil || json.Unmarshal(body, &req) != nil:
		bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request, please reformat your input and try again.")
		return
	case raw["model"] != nil:
		bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #: extraneous key [model] is not permitted, please reformat your input and try again.")
		return
	case raw["stream"] != nil:
		bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #: extraneous key [stream] is not permitted, please reformat your input and try again.")
		return
	case req.AnthropicVersion != "bedrock-2023-05-31":
		bedrockError(w, http.StatusBadRequest, "ValidationException", "Invalid API version: want anthropic_version bedrock-2023-05-31")
		return
	case req.MaxTokens <= 0:
		bedrockError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #: required key [max_tokens] not found, please reformat your input and try again.")
		return
	}
	x := &claudeExchange{w: w, r: r, rc: http.NewResponseController(w), b: b, req: req, model: model, name: m.opts.Name,
		id: fmt.Sprintf("bdrk_%d", m.seq.Load()), closed: m.closed, frame: bedrockFraming{}}
	if !x.wait(b.Delay) {
		x.abort(false)
		return
	}
	if m.failFirst(b, source, model) {
		bedrockStatus(w, b.Behavior, b.Status)
		return
	}
	switch b.Mode {
	case ModeStatus, ModeRateLimit:
		bedrockStatus(w, b.Behavior, b.Status)
	case ModeContextLength:
		bedrockError(w, http.StatusBadRequest, "ValidationException", b.message("Input is too long for requested model."))
	case ModeContentPolicy:
		bedrockError(w, http.StatusBadRequest, "ValidationException", b.message("The request was blocked by the content filter."))
	case ModeReset:
		x.abort(true)
	case ModeHang:
		x.block()
		x.abort(false)
	default:
		if msg := x.prefillRefusal(); msg != "" {
			bedrockError(w, http.StatusBadRequest, "ValidationException", msg)
			return
		}
		x.headers = http.Header{}
		if stream {
			x.headers.Set("X-Amzn-Bedrock-Content-Type", "application/json")
		} else {
			x.headers.Set("X-Amzn-Bedrock-Input-Token-Count", strconv.Itoa(x.inputTokens()))
			x.headers.Set("X-Amzn-Bedrock-Invocation-Latency", "42")
		}
		x.play(stream)
	}
}

// bedrockPath reads the model id and operation from /…/model/{modelId}/invoke[-with-response-stream].
func bedrockPath(path string) (model string, stream, ok bool) {
	i := strings.LastIndex(path, "/model/")
	if i < 0 {
		return "", false, false
	}
	rest := path[i+len("/model/"):]
	switch {
	case strings.HasSuffix(rest, "/invoke-with-response-stream"):
		return strings.TrimSuffix(rest, "/invoke-with-response-stream"), true, rest != "/invoke-with-response-stream"
	case strings.HasSuffix(rest, "/invoke"):
		return strings.TrimSuffix(rest, "/invoke"), false, rest != "/invoke"
	}
	return "", false, false
}

// verify checks the request's SigV4 signature by signing the same request again, with the SDK's
// signer, the secret the mock knows for its access key id and its own X-Amz-Date, over the same
// signed headers and the body received. It returns the error Bedrock answers, or "".
func (m *Bedrock) verify(r *http.Request, body []byte) (code, msg string) {
	const bad = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return "IncompleteSignatureException", "Authorization header requires 'Credential' parameter."
	}
	var creds aws.Credentials
	found := false
	for _, c := range m.opts.Credentials {
		if c.AccessKeyID == scope[0] {
			creds, found = c, true
		}
	}
	if !found {
		return "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	if scope[2] != m.opts.Region || scope[3] != "bedrock" {
		return "InvalidSignatureException", fmt.Sprintf("Credential should be scoped to a valid region (%s) and service (bedrock).", m.opts.Region)
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || when.Format("20060102") != scope[1] {
		return "IncompleteSignatureException", "Date must be in ISO-8601 'basic format' and match the credential scope."
	}
	if d := m.opts.Now().Sub(when); d > m.opts.MaxSkew || d < -m.opts.MaxSkew {
		return "InvalidSignatureException", "Signature expired: the request time is too far from the server time."
	}
	if creds.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != creds.SessionToken {
		return "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	// The same request again, with only the headers the client signed.
	again, err := http.NewRequestWithContext(context.Background(), r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return "InvalidSignatureException", bad
	}
	again.Host = r.Host
	again.ContentLength = r.ContentLength
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		switch h {
		case "host", "content-length", "x-amz-date", "x-amz-security-token":
			continue // the signer writes these itself
		}
		for _, v := range r.Header.Values(h) {
			again.Header.Add(h, v)
		}
	}
	sum := sha256.Sum256(body)
	if err := m.signer.SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), "bedrock", m.opts.Region, when); err != nil {
		return "InvalidSignatureException", bad
	}
	want := again.Header.Get("Authorization")
	if !hmac.Equal([]byte(want), []byte(auth)) {
		return "InvalidSignatureException", bad
	}
	return "", ""
}

// bedrockStatus answers status with the exception Bedrock answers it with.
func bedrockStatus(w http.ResponseWriter, b Behavior, status int) {
	code, msg := "InternalServerException", "The server encountered an error processing your request."
	switch status {
	case http.StatusTooManyRequests:
		code, msg = "ThrottlingException", "Too many requests, please wait before trying again."
	case http.StatusServiceUnavailable:
		code, msg = "ServiceUnavailableException", "Bedrock is unable to process your request."
	case http.StatusBadRequest:
		code, msg = "ValidationException", "The request was rejected by the provider."
	case http.StatusForbidden:
		code, msg = "AccessDeniedException", "User: arn:aws:iam::123456789012:role/leaky-role is not authorized to perform: bedrock:InvokeModel"
	case http.StatusNotFound:
		code, msg = "ResourceNotFoundException", "Could not resolve the foundation model from the provided model identifier."
	case http.StatusRequestTimeout:
		code, msg = "ModelTimeoutException", "Model has timed out in processing the request."
	case http.StatusFailedDependency:
		code, msg = "ModelErrorException", "The model returned an error."
	}
	if b.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(b.RetryAfter))
	}
	bedrockError(w, status, code, b.message(msg))
}

// bedrockError writes a Bedrock error answer: the X-Amzn-ErrorType header and a JSON body, as
// the service does (the SDK reads the header first, then the body's __type).
func bedrockError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Amzn-Errortype", code+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	body := map[string]string{"message": msg}
	if msg == "" {
		body = map[string]string{}
	}
	data, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// bedrockFraming is AWS's binary event stream, encoded by the SDK's encoder.
type bedrockFraming struct{}

func (bedrockFraming) streamContentType() string { return "application/vnd.amazon.eventstream" }

func encodeMessage(headers eventstream.Headers, payload []byte) []byte {
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: headers, Payload: payload}); err != nil {
		panic(err) // the mock's own frames are small and well formed
	}
	return buf.Bytes()
}

func (bedrockFraming) event(_ string, data []byte) []byte {
	if strings.Contains(string(data), `"type":"message_stop"`) {
		// Bedrock adds its invocation metrics to message_stop.
		data = []byte(`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":10,"outputTokenCount":3,"invocationLatency":42,"firstByteLatency":12}}`)
	}
	payload, _ := json.Marshal(map[string][]byte{"bytes": data}) // []byte encodes as base64
	var h eventstream.Headers
	h.Set(eventstreamapi.EventTypeHeader, eventstream.StringValue("chunk"))
	h.Set(eventstreamapi.ContentTypeHeader, eventstream.StringValue("application/json"))
	h.Set(eventstreamapi.MessageTypeHeader, eventstream.StringValue(eventstreamapi.EventMessageType))
	return encodeMessage(h, payload)
}

func (bedrockFraming) streamError(name, message string) []byte {
	payload, _ := json.Marshal(map[string]string{"message": message})
	var h eventstream.Headers
	h.Set(eventstreamapi.ExceptionTypeHeader, eventstream.StringValue(name))
	h.Set(eventstreamapi.ContentTypeHeader, eventstream.StringValue("application/json"))
	h.Set(eventstreamapi.MessageTypeHeader, eventstream.StringValue(eventstreamapi.ExceptionMessageType))
	return encodeMessage(h, payload)
}

// garbage is a well-framed chunk whose bytes are not an Anthropic event: a reader passes it over.
func (bedrockFraming) garbage() []byte {
	payload, _ := json.Marshal(map[string][]byte{"bytes": []byte("{not json")})
	var h eventstream.Headers
	h.Set(eventstreamapi.EventTypeHeader, eventstream.StringValue("chunk"))
	h.Set(eventstreamapi.ContentTypeHeader, eventstream.StringValue("application/json"))
	h.Set(eventstreamapi.MessageTypeHeader, eventstream.StringValue(eventstreamapi.EventMessageType))
	return encodeMessage(h, payload)
}
