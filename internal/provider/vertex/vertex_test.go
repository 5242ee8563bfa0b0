package vertex_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/provider"
	"github.com/switchyard-io/switchyard/internal/provider/vertex"
)

const (
	email   = "switchyard@my-project.iam.gserviceaccount.com"
	project = "my-project"
	loc     = "us-east5"
	model   = "claude-sonnet-4-5@20250929"
)

var (
	keyOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

func testKey(t *testing.T) *rsa.PrivateKey {
	keyOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
	})
	return rsaKey
}

// serviceAccount is a service-account key file whose token_uri is the mock's token endpoint.
func serviceAccount(t *testing.T, key *rsa.PrivateKey, tokenURI string) string {
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": project, "private_key_id": "k1", "client_email": email,
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": tokenURI,
	})
	return string(b)
}

type rig struct {
	mock *mockprovider.Vertex
	ts   *httptest.Server
	a    *vertex.Adapter
}

func newRig(t *testing.T, ttl time.Duration, signWith *rsa.PrivateKey) *rig {
	t.Helper()
	key := testKey(t)
	m := mockprovider.NewVertex(mockprovider.VertexOptions{Project: project, Location: loc, TokenTTL: ttl,
		ServiceAccounts: map[string]*rsa.PublicKey{email: &key.PublicKey}})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	t.Cleanup(m.Close)
	if signWith == nil {
		signWith = key
	}
	a, err := vertex.New(vertex.Config{Project: project, Region: loc, BaseURL: ts.URL + "/v1", Credentials: serviceAccount(t, signWith, ts.URL+"/token"), HTTPClient: ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{mock: m, ts: ts, a: a}
}

func (r *rig) do(t *testing.T, ctx context.Context, body string, stream bool, behavior string) (*http.Response, error) {
	t.Helper()
	req, err := r.a.NewRequest(ctx, provider.Request{Model: model, Body: []byte(body), Stream: stream, Beta: []string{"context-1m-2025-08-07"}})
	if err != nil {
		return nil, err
	}
	if behavior != "" {
		req.Header.Set(mockprovider.BehaviorHeader, behavior)
	}
	return r.ts.Client().Transport.RoundTrip(req)
}

const textBody = `{"model":"claude-sonnet-4-5","stream":false,"max_tokens":128,"messages":[{"role":"user","content":"hi there"}],"future_field":{"kept":true}}`

const toolBody = `{"max_tokens":128,"messages":[{"role":"user","content":"weather in Astana"}],"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`

func TestRawPredict(t *testing.T) {
	r := newRig(t, 0, nil)
	resp, err := r.do(t, context.Background(), textBody, false, "")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var msg struct {
		Type    string
		Model   string
		Content []struct{ Text string }
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &msg) != nil || msg.Type != "message" || msg.Model != model || !strings.Contains(msg.Content[0].Text, "Hello from vertex-mock") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var sent map[string]json.RawMessage
	_ = json.Unmarshal(r.mock.LastBody(), &sent)
	if string(sent["anthropic_version"]) != `"vertex-2023-10-16"` || sent["model"] != nil || sent["stream"] != nil || string(sent["future_field"]) != `{"kept":true}` {
		t.Fatalf("sent %s", r.mock.LastBody())
	}
	if got := r.mock.LastHeaders().Get("anthropic-beta"); got != "context-1m-2025-08-07" {
		t.Fatalf("anthropic-beta %q", got)
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

func TestStreamRawPredict(t *testing.T) {
	r := newRig(t, 0, nil)
	evs, err := stream(t, r, textBody, "garbage;after=2")
	if !errors.Is(err, io.EOF) {
		t.Fatalf("end %v", err)
	}
	var types []string
	text := ""
	for _, ev := range evs {
		types = append(types, ev.Type)
		var d struct {
			Delta struct{ Text string } `json:"delta"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		text += d.Delta.Text
	}
	if strings.Join(types, ",") != "message_start,content_block_start,ping,content_block_delta,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop" || text != "Hello from vertex-mock" {
		t.Fatalf("events %v text %q", types, text)
	}
	if !strings.Contains(string(r.mock.LastBody()), `"stream":true`) {
		t.Fatalf("sent %s", r.mock.LastBody())
	}
}

func TestStreamTools(t *testing.T) {
	r := newRig(t, 0, nil)
	evs, err := stream(t, r, toolBody, "")
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	partial, stop := "", ""
	for _, ev := range evs {
		var d struct {
			Delta struct {
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		partial += d.Delta.PartialJSON
		if d.Delta.StopReason != "" {
			stop = d.Delta.StopReason
		}
	}
	if partial != `{"query":"weather in Astana"}` || stop != "tool_use" {
		t.Fatalf("input %q stop %q", partial, stop)
	}
}

func TestErrorClasses(t *testing.T) {
	r := newRig(t, 0, nil)
	for _, c := range []struct {
		behavior string
		outcome  health.Outcome
		code     string
		retry    time.Duration
		client   string
	}{
		{"429;retry_after=7", health.OutcomeRateLimited, "RESOURCE_EXHAUSTED", 7 * time.Second, ""},
		{"529", health.OutcomeServerError, "overloaded_error", 0, ""},
		{"503", health.OutcomeServerError, "UNAVAILABLE", 0, ""},
		{"500", health.OutcomeServerError, "INTERNAL", 0, ""},
		{"504", health.OutcomeTimeout, "DEADLINE_EXCEEDED", 0, ""},
		{"403", health.OutcomeServerError, "PERMISSION_DENIED", 0, ""},
		{"401", health.OutcomeServerError, "UNAUTHENTICATED", 0, ""},
		{"404", health.OutcomeMisconfigured, "NOT_FOUND", 0, ""},
		{"context_length_exceeded", health.OutcomeClientError, "invalid_request_error", 0, "prompt is too long"},
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
				t.Fatalf("%+v, want %s %s %v", f, c.outcome, c.code, c.retry)
			}
			if c.client != "" && !strings.Contains(f.ClientMessage, c.client) {
				t.Fatalf("client message %q", f.ClientMessage)
			}
			if c.client == "" && (strings.Contains(f.ClientMessage, "leaky-sa") || strings.Contains(f.ClientMessage, "Quota")) || strings.Contains(f.Detail, "leaky-sa") {
				t.Fatalf("the provider's text leaked: %+v", f)
			}
		})
	}
	for _, c := range []struct {
		behavior string
		outcome  health.Outcome
		code     string
	}{
		{"stream_error=overloaded_error;after=2", health.OutcomeStreamCut, "overloaded_error"},
		{"stream_error=overloaded_error", health.OutcomeServerError, "overloaded_error"},
		{"stream_error=rate_limit_error", health.OutcomeRateLimited, "rate_limit_error"},
		{"no_done", health.OutcomeStreamCut, "incomplete_stream"},
	} {
		t.Run(c.behavior, func(t *testing.T) {
			_, err := stream(t, r, textBody, c.behavior)
			var f *provider.Failure
			if !errors.As(err, &f) || f.Outcome != c.outcome || f.Code != c.code {
				t.Fatalf("%v, want %s %s", err, c.outcome, c.code)
			}
		})
	}
}

func TestTransportFailures(t *testing.T) {
	r := newRig(t, 0, nil)
	if _, err := r.do(t, context.Background(), textBody, false, "reset"); err == nil {
		t.Fatal("reset: no error")
	}
	resp, err := r.do(t, context.Background(), textBody, true, "cut;after=1")
	if err != nil {
		t.Fatal(err)
	}
	er, _ := r.a.DecodeStream(resp)
	if _, err := readAll(t, er); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := r.do(t, ctx, textBody, true, "hang"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang: %v", err)
	}
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
		if _, err := readAll(t, er); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: %v", b, err)
		}
	}
}

// A key the token endpoint does not know: no token, a channel failure before anything is sent.
func TestWrongKey(t *testing.T) {
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 0, other)
	_, err = r.do(t, context.Background(), textBody, false, "")
	var f *provider.Failure
	if !errors.As(err, &f) || f.Outcome != health.OutcomeServerError || f.Code != "CredentialsUnavailable" || r.mock.TokensIssued() != 0 {
		t.Fatalf("%v", err)
	}
	if strings.Contains(f.ClientMessage, "JWT") || strings.Contains(f.Error(), "PRIVATE KEY") {
		t.Fatalf("%+v", f)
	}
	// A bearer the mock never issued is refused by the API itself.
	req, _ := http.NewRequest(http.MethodPost, r.ts.URL+"/v1/projects/"+project+"/locations/"+loc+"/publishers/anthropic/models/"+model+":rawPredict", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer ya29.forged")
	resp, err := r.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if f := r.a.ClassifyError(resp.StatusCode, resp.Header, b); resp.StatusCode != 401 || f.Code != "UNAUTHENTICATED" || f.Outcome != health.OutcomeServerError {
		t.Fatalf("%d %+v", resp.StatusCode, f)
	}
}

// Tokens are cached for their lifetime and fetched again when they near expiry (the oauth2
// token source refreshes within 10s of the expiry: a 5s token is stale at once).
func TestTokenRefresh(t *testing.T) {
	for _, c := range []struct {
		ttl    time.Duration
		tokens int
	}{{time.Hour, 1}, {5 * time.Second, 3}} {
		r := newRig(t, c.ttl, nil)
		for i := 0; i < 3; i++ {
			resp, err := r.do(t, context.Background(), textBody, false, "")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("ttl %v request %d: %v %v", c.ttl, i, resp, err)
			}
			resp.Body.Close()
		}
		if got := r.mock.TokensIssued(); got != c.tokens {
			t.Fatalf("ttl %v: %d tokens for 3 requests, want %d", c.ttl, got, c.tokens)
		}
	}
}

func TestEndpoint(t *testing.T) {
	for region, want := range map[string]string{
		"us-east5": "https://us-east5-aiplatform.googleapis.com/v1",
		"global":   "https://aiplatform.googleapis.com/v1",
	} {
		u, err := vertex.Endpoint(region, "")
		if err != nil || u.String() != want {
			t.Errorf("%s: %v %v", region, u, err)
		}
	}
}

func TestValidateAndSecret(t *testing.T) {
	for _, c := range []struct {
		spec v1alpha1.ProviderChannelSpec
		want string
	}{
		{v1alpha1.ProviderChannelSpec{Region: "us-east5", Project: "my-project"}, ""},
		{v1alpha1.ProviderChannelSpec{Project: "my-project"}, "spec.region"},
		{v1alpha1.ProviderChannelSpec{Region: "us-east5"}, "spec.project"},
		{v1alpha1.ProviderChannelSpec{Region: "us-east5", Project: "a/b"}, "spec.project"},
		{v1alpha1.ProviderChannelSpec{Region: "us-east5", Project: "my-project", BaseURL: "ftp://x"}, "spec.baseURL"},
	} {
		err := vertex.Validate(&c.spec)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
	sa := serviceAccount(t, testKey(t), "https://oauth2.example/token")
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gcp"}, Data: map[string][]byte{vertex.SecretKey: []byte(sa)}}
	if v, err := vertex.SecretValue(s, vertex.SecretKeyOf(&v1alpha1.SecretKeyRef{Name: "gcp"})); err != nil || v != sa {
		t.Fatalf("%v", err)
	}
	for name, bad := range map[string]string{
		"not JSON":            "-----BEGIN PRIVATE KEY----- leaky",
		"user credentials":    `{"type":"authorized_user","refresh_token":"leaky"}`,
		"external account":    `{"type":"external_account","credential_source":{"url":"http://169.254.169.254/leaky"}}`,
		"token_uri not https": strings.Replace(sa, "https://oauth2.example/token", "http://10.0.0.1/token", 1),
	} {
		s.Data[vertex.SecretKey] = []byte(bad)
		_, err := vertex.SecretValue(s, vertex.SecretKey)
		if err == nil || strings.Contains(err.Error(), "leaky") || strings.Contains(err.Error(), "PRIVATE") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
