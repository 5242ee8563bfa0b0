package bedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/provider"
	"github.com/switchyard-io/switchyard/internal/provider/bedrock"
)

var key = aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "test-secret"}

const model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

type rig struct {
	mock *mockprovider.Bedrock
	ts   *httptest.Server
	a    *bedrock.Adapter
}

func newRig(t *testing.T, creds string, known ...aws.Credentials) *rig {
	t.Helper()
	if len(known) == 0 {
		known = []aws.Credentials{key}
	}
	m := mockprovider.NewBedrock(mockprovider.BedrockOptions{Region: "eu-west-1", Credentials: known})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	t.Cleanup(m.Close)
	if creds == "" {
		creds = `{"accessKeyId":"AKIDTEST","secretAccessKey":"test-secret"}`
	}
	a, err := bedrock.New(bedrock.Config{Region: "eu-west-1", BaseURL: ts.URL + "/", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{mock: m, ts: ts, a: a}
}

// do runs one attempt as the proxy would: NewRequest, the transport, then the answer.
func (r *rig) do(t *testing.T, ctx context.Context, body string, stream bool, behavior string) (*http.Response, error) {
	t.Helper()
	req, err := r.a.NewRequest(ctx, provider.Request{Model: model, Body: []byte(body), Stream: stream})
	if err != nil {
		return nil, err
	}
	if behavior != "" {
		// Added after signing, as the proxy adds its own headers: not signed, still accepted.
		req.Header.Set(mockprovider.BehaviorHeader, behavior)
	}
	return r.ts.Client().Transport.RoundTrip(req)
}

const textBody = `{"model":"claude-sonnet-4-5","stream":true,"max_tokens":128,"messages":[{"role":"user","content":"hi there"}],"metadata":{"user_id":"u-1"},"top_k":5,"future_field":{"kept":[1,2,3]}}`

const toolBody = `{"max_tokens":128,"messages":[{"role":"user","content":"weather in Almaty"}],"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object"}}]}`

func TestInvokeModel(t *testing.T) {
	r := newRig(t, "")
	resp, err := r.do(t, context.Background(), textBody, false, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var msg struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct{ Text string }
	}
	if err := json.Unmarshal(b, &msg); err != nil || msg.Type != "message" || msg.StopReason != "end_turn" || !strings.Contains(msg.Content[0].Text, "Hello from") {
		t.Fatalf("answer %s", b)
	}
	// What went upstream: Bedrock's anthropic_version, no model or stream, every other field kept.
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(r.mock.LastBody(), &sent); err != nil {
		t.Fatal(err)
	}
	if string(sent["anthropic_version"]) != `"bedrock-2023-05-31"` || sent["model"] != nil || sent["stream"] != nil ||
		string(sent["future_field"]) != `{"kept":[1,2,3]}` || string(sent["metadata"]) != `{"user_id":"u-1"}` || string(sent["top_k"]) != "5" {
		t.Fatalf("sent %s", r.mock.LastBody())
	}
	if r.mock.Requests(model) != 1 {
		t.Fatalf("the model id in the path was not %q", model)
	}
}

func readAll(t *testing.T, er provider.EventReader) ([]provider.Event, error) {
	t.Helper()
	defer er.Close()
	var evs []provider.Event
	for i := 0; i < 1000; i++ {
		ev, err := er.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	t.Fatal("stream did not end")
	return nil, nil
}

func stream(t *testing.T, r *rig, body, behavior string) ([]provider.Event, error) {
	t.Helper()
	resp, err := r.do(t, context.Background(), body, true, behavior)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	er, err := r.a.DecodeStream(resp)
	if err != nil {
		t.Fatal(err)
	}
	return readAll(t, er)
}

func TestStreamText(t *testing.T) {
	r := newRig(t, "")
	evs, err := stream(t, r, textBody, "garbage;after=1")
	if !errors.Is(err, io.EOF) {
		t.Fatalf("end %v, want io.EOF", err)
	}
	var types []string
	text := ""
	var sse []byte
	for _, ev := range evs {
		types = append(types, ev.Type)
		sse = ev.AppendSSE(sse)
		var d struct {
			Delta struct{ Text string } `json:"delta"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		text += d.Delta.Text
	}
	// The garbage chunk was passed over; the events are the Anthropic API's.
	want := "message_start,content_block_start,ping,content_block_delta,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	if strings.Join(types, ",") != want {
		t.Fatalf("events %v", types)
	}
	if text != "Hello from bedrock-mock" {
		t.Fatalf("text %q", text)
	}
	if last := string(evs[len(evs)-1].Data); last != `{"type":"message_stop"}` {
		t.Fatalf("message_stop %s: Bedrock's invocation metrics must not reach an Anthropic client", last)
	}
	if !strings.HasPrefix(string(sse), "event: message_start\ndata: {") || !strings.HasSuffix(string(sse), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Fatalf("SSE %s", sse)
	}
}

func TestStreamTools(t *testing.T) {
	r := newRig(t, "")
	evs, err := stream(t, r, toolBody, "")
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	partial, name, stop := "", "", ""
	for _, ev := range evs {
		var d struct {
			ContentBlock struct{ Type, Name string } `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if d.ContentBlock.Type == "tool_use" {
			name = d.ContentBlock.Name
		}
		partial += d.Delta.PartialJSON
		if d.Delta.StopReason != "" {
			stop = d.Delta.StopReason
		}
	}
	if name != "get_weather" || partial != `{"query":"weather in Almaty"}` || stop != "tool_use" {
		t.Fatalf("tool %q input %q stop %q", name, partial, stop)
	}
}

// Each Bedrock error class, as an answer and in a stream.
func TestErrorClasses(t *testing.T) {
	r := newRig(t, "")
	for _, c := range []struct {
		behavior string
		outcome  health.Outcome
		code     string
		retry    time.Duration
		client   string // in ClientMessage; "" means the provider's text must not be there
	}{
		{"429;retry_after=3", health.OutcomeRateLimited, "ThrottlingException", 3 * time.Second, ""},
		{"429", health.OutcomeRateLimited, "ThrottlingException", 0, ""},
		{"503", health.OutcomeServerError, "ServiceUnavailableException", 0, ""},
		{"500", health.OutcomeServerError, "InternalServerException", 0, ""},
		{"403", health.OutcomeServerError, "AccessDeniedException", 0, ""},
		{"404", health.OutcomeMisconfigured, "ResourceNotFoundException", 0, ""},
		{"408", health.OutcomeTimeout, "ModelTimeoutException", 0, ""},
		{"context_length_exceeded", health.OutcomeClientError, "ValidationException", 0, "Input is too long"},
	} {
		t.Run(c.behavior, func(t *testing.T) {
			resp, err := r.do(t, context.Background(), textBody, false, c.behavior)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			f := r.a.ClassifyError(resp.StatusCode, resp.Header, b)
			if f.Outcome != c.outcome || f.Code != c.code || f.RetryAfter != c.retry {
				t.Fatalf("%+v, want %s %s retry %v", f, c.outcome, c.code, c.retry)
			}
			if c.client != "" && !strings.Contains(f.ClientMessage, c.client) {
				t.Fatalf("client message %q, want %q", f.ClientMessage, c.client)
			}
			if c.client == "" && (strings.Contains(f.ClientMessage, "arn:aws") || strings.Contains(f.ClientMessage, "Bedrock")) {
				t.Fatalf("client message %q quotes the provider", f.ClientMessage)
			}
			if strings.Contains(f.Detail, "leaky-role") || strings.Contains(f.ClientMessage, "leaky-role") {
				t.Fatalf("the account's role leaked: %+v", f)
			}
		})
	}
	for _, c := range []struct {
		behavior string
		outcome  health.Outcome
		code     string
		after    bool
	}{
		{"stream_error=modelStreamErrorException;after=2", health.OutcomeStreamCut, "ModelStreamErrorException", true},
		{"stream_error=internalServerException;after=1", health.OutcomeStreamCut, "InternalServerException", true},
		// Bedrock can answer 200 and throttle in the stream's first event: still a rate limit,
		// and still before anything reached the client.
		{"stream_error=throttlingException", health.OutcomeRateLimited, "ThrottlingException", false},
		{"stream_error=serviceUnavailableException", health.OutcomeServerError, "ServiceUnavailableException", false},
		{"stream_error=validationException", health.OutcomeClientError, "ValidationException", false},
		{"no_done", health.OutcomeStreamCut, "incomplete_stream", true},
	} {
		t.Run(c.behavior, func(t *testing.T) {
			_, err := stream(t, r, textBody, c.behavior)
			var f *provider.Failure
			if !errors.As(err, &f) || f.Outcome != c.outcome || f.Code != c.code || f.AfterFirstEvent != c.after {
				t.Fatalf("%v (%+v), want %s %s", err, f, c.outcome, c.code)
			}
		})
	}
}

// A connection cut mid-stream or reset before the answer reaches the proxy as the transport's
// error, which the proxy classifies (it alone knows its own timeouts).
func TestTransportFailures(t *testing.T) {
	r := newRig(t, "")
	if _, err := r.do(t, context.Background(), textBody, false, "reset"); err == nil {
		t.Fatal("reset: no error")
	}
	resp, err := r.do(t, context.Background(), textBody, true, "cut;after=1")
	if err != nil {
		t.Fatal(err)
	}
	er, _ := r.a.DecodeStream(resp)
	evs, err := readAll(t, er)
	var f *provider.Failure
	if errors.As(err, &f) || !errors.Is(err, io.ErrUnexpectedEOF) || len(evs) < 3 {
		t.Fatalf("cut: %d events, %v", len(evs), err)
	}

	// A provider that never answers: the proxy's timer ends the attempt (here a context deadline).
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := r.do(t, ctx, textBody, true, "hang"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang: %v", err)
	}

	// A stall and a silent first event end when the proxy's timer cancels the attempt.
	for _, b := range []string{"stall;after=1", "slow_first_token;first_token_delay=10m"} {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := r.do(t, ctx, textBody, true, b+";headers_first")
		if err != nil {
			t.Fatal(err)
		}
		er, _ := r.a.DecodeStream(resp)
		if b == "stall;after=1" {
			if ev, err := er.Next(); err != nil || ev.Type != "message_start" {
				t.Fatalf("%s: %v %v", b, ev, err)
			}
		}
		cancel()
		_, err = readAll(t, er)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: %v, want the context's cancellation", b, err)
		}
	}
}

// Undecodable framing (a bad CRC) cannot be resynchronised: the stream is over, as a cut.
func TestCorruptFraming(t *testing.T) {
	good := httptest.NewRecorder()
	m := mockprovider.NewBedrock(mockprovider.BedrockOptions{Credentials: []aws.Credentials{key}})
	a, _ := bedrock.New(bedrock.Config{Region: "us-east-1", BaseURL: "http://127.0.0.1:1", Credentials: `{"accessKeyId":"AKIDTEST","secretAccessKey":"test-secret"}`})
	req, _ := a.NewRequest(context.Background(), provider.Request{Model: "m", Body: []byte(textBody), Stream: true})
	m.ServeHTTP(good, req)
	frames := good.Body.Bytes()
	if good.Code != 200 || len(frames) < 100 {
		t.Fatalf("%d %q", good.Code, frames)
	}
	frames[len(frames)-60] ^= 0xff // inside the last frames
	resp := &http.Response{StatusCode: 200, Header: good.Header(), Body: io.NopCloser(strings.NewReader(string(frames)))}
	er, err := a.DecodeStream(resp)
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, er)
	var f *provider.Failure
	if !errors.As(err, &f) || f.Outcome != health.OutcomeStreamCut || f.Code != "MalformedEventStream" {
		t.Fatalf("%v", err)
	}

	// A 200 that is not an event stream (a proxy's HTML page) is the channel's failure.
	resp = &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, Body: io.NopCloser(strings.NewReader("<html>"))}
	if _, err := a.DecodeStream(resp); !errors.As(err, &f) || f.Outcome != health.OutcomeServerError {
		t.Fatalf("%v", err)
	}
}

// A wrong secret, an unknown key or a missing session token: the mock refuses the signature, and
// the answer is a channel failure whose text never reaches the client.
func TestSignatureFailures(t *testing.T) {
	withToken := aws.Credentials{AccessKeyID: "ASIATEMP", SecretAccessKey: "temp-secret", SessionToken: "the-session-token"}
	for _, c := range []struct{ name, creds, code string }{
		{"wrong secret", `{"accessKeyId":"AKIDTEST","secretAccessKey":"not-the-secret"}`, "InvalidSignatureException"},
		{"unknown key", `{"accessKeyId":"AKIDOTHER","secretAccessKey":"test-secret"}`, "UnrecognizedClientException"},
		{"missing session token", `{"accessKeyId":"ASIATEMP","secretAccessKey":"temp-secret"}`, "UnrecognizedClientException"},
		{"wrong session token", `{"accessKeyId":"ASIATEMP","secretAccessKey":"temp-secret","sessionToken":"other"}`, "UnrecognizedClientException"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.creds, key, withToken)
			resp, err := r.do(t, context.Background(), textBody, false, "")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			f := r.a.ClassifyError(resp.StatusCode, resp.Header, b)
			if resp.StatusCode != 403 || f.Code != c.code || f.Outcome != health.OutcomeServerError || r.mock.Refused() != 1 {
				t.Fatalf("%d %+v (refused %d)", resp.StatusCode, f, r.mock.Refused())
			}
			if strings.Contains(f.ClientMessage, "signature") || strings.Contains(f.ClientMessage, "token") {
				t.Fatalf("client message %q", f.ClientMessage)
			}
		})
	}
	r := newRig(t, `{"accessKeyId":"ASIATEMP","secretAccessKey":"temp-secret","sessionToken":"the-session-token"}`, withToken)
	resp, err := r.do(t, context.Background(), textBody, false, "")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("temporary credentials: %v %v", resp.Status, err)
	}
	resp.Body.Close()
}

// rotating hands out a new key pair on every call, each expiring at once: the adapter asks its
// credentials cache on every request, and the cache refreshes expired credentials.
type rotating struct{ n atomic.Int32 }

func (p *rotating) Retrieve(context.Context) (aws.Credentials, error) {
	n := p.n.Add(1)
	k := aws.Credentials{AccessKeyID: "AKIDROT" + string(rune('0'+n)), SecretAccessKey: "rot-secret", CanExpire: true, Expires: time.Now().Add(time.Minute)}
	return k, nil
}

func TestCredentialsRefresh(t *testing.T) {
	var known []aws.Credentials
	for i := 1; i <= 3; i++ {
		known = append(known, aws.Credentials{AccessKeyID: "AKIDROT" + string(rune('0'+i)), SecretAccessKey: "rot-secret"})
	}
	m := mockprovider.NewBedrock(mockprovider.BedrockOptions{Credentials: known})
	ts := httptest.NewServer(m)
	defer ts.Close()
	defer m.Close()
	for _, c := range []struct {
		window time.Duration
		calls  int32
	}{
		{0, 1},               // valid for a minute: fetched once for three requests
		{2 * time.Minute, 3}, // inside the refresh window at once: refreshed before each request
	} {
		p := &rotating{}
		a, err := bedrock.New(bedrock.Config{Region: "us-east-1", BaseURL: ts.URL,
			Provider: aws.NewCredentialsCache(p, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = c.window })})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			req, err := a.NewRequest(context.Background(), provider.Request{Model: "m", Body: []byte(textBody)})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := ts.Client().Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("request %d: %v %v", i, resp.Status, err)
			}
			resp.Body.Close()
		}
		if got := p.n.Load(); got != c.calls {
			t.Fatalf("window %v: %d credential fetches, want %d", c.window, got, c.calls)
		}
	}
}

// Credentials that cannot be had are a channel failure before anything is sent.
func TestCredentialsUnavailable(t *testing.T) {
	a, _ := bedrock.New(bedrock.Config{Region: "us-east-1", BaseURL: "http://127.0.0.1:1", Provider: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("no web identity token")
	})})
	_, err := a.NewRequest(context.Background(), provider.Request{Model: "m", Body: []byte(textBody)})
	var f *provider.Failure
	if !errors.As(err, &f) || f.Outcome != health.OutcomeServerError || f.Code != "CredentialsUnavailable" {
		t.Fatalf("%v", err)
	}
}

// Without a Secret the SDK's default chain finds the pod's identity: IRSA is a web identity token
// file and a role, exchanged at STS (here a loopback mock) for temporary credentials.
func TestDefaultChainWebIdentity(t *testing.T) {
	temp := aws.Credentials{AccessKeyID: "ASIAIRSA", SecretAccessKey: "irsa-secret", SessionToken: "irsa-token"}
	var stsCalls atomic.Int32
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.Form.Get("Action") != "AssumeRoleWithWebIdentity" || r.Form.Get("WebIdentityToken") != "projected-sa-token" || r.Form.Get("RoleArn") != "arn:aws:iam::123456789012:role/switchyard" {
			http.Error(w, "bad request "+r.Form.Encode(), http.StatusBadRequest)
			return
		}
		stsCalls.Add(1)
		w.Header().Set("Content-Type", "text/xml")
		_, _ = io.WriteString(w, `<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>`+
			`<AccessKeyId>ASIAIRSA</AccessKeyId><SecretAccessKey>irsa-secret</SecretAccessKey><SessionToken>irsa-token</SessionToken>`+
			`<Expiration>`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`</Expiration></Credentials></AssumeRoleWithWebIdentityResult>`+
			`<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`)
	}))
	defer sts.Close()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("projected-sa-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "none"),
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "us-east-1",
		"AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/switchyard",
		"AWS_ENDPOINT_URL_STS": sts.URL,
	} {
		t.Setenv(k, v)
	}
	creds, err := bedrock.LoadDefaultCredentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := mockprovider.NewBedrock(mockprovider.BedrockOptions{Credentials: []aws.Credentials{temp}})
	ts := httptest.NewServer(m)
	defer ts.Close()
	defer m.Close()
	a, _ := bedrock.New(bedrock.Config{Region: "us-east-1", BaseURL: ts.URL, Provider: creds})
	for i := 0; i < 2; i++ {
		req, err := a.NewRequest(context.Background(), provider.Request{Model: "m", Body: []byte(textBody)})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := ts.Client().Do(req)
		if err != nil || resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%v %s", err, b)
		}
		resp.Body.Close()
	}
	if stsCalls.Load() != 1 {
		t.Fatalf("%d STS calls for two requests, want 1 (cached)", stsCalls.Load())
	}
}

func TestEndpointFromRegion(t *testing.T) {
	for region, want := range map[string]string{
		"us-east-1":  "https://bedrock-runtime.us-east-1.amazonaws.com",
		"cn-north-1": "https://bedrock-runtime.cn-north-1.amazonaws.com.cn",
	} {
		u, err := bedrock.Endpoint(region, "")
		if err != nil || u.String() != want {
			t.Errorf("%s: %v %v, want %s", region, u, err, want)
		}
	}
	a, _ := bedrock.New(bedrock.Config{Region: "us-east-1", Credentials: `{"accessKeyId":"A","secretAccessKey":"s"}`})
	req, err := a.NewRequest(context.Background(), provider.Request{Model: "arn:aws:bedrock:us-east-1:1:inference-profile/us.x:0", Body: []byte(textBody), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	// The SDK escapes a model id (":" and "/" of an ARN) in the path the same way.
	if got := req.URL.String(); got != "https://bedrock-runtime.us-east-1.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x%3A0/invoke-with-response-stream" {
		t.Fatalf("URL %s", got)
	}
}
