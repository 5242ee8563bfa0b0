package mockprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
)

var testAWS = aws.Credentials{AccessKeyID: "AKIDMOCK", SecretAccessKey: "mock-secret"}

func bedrockRig(t *testing.T) (*Bedrock, *httptest.Server) {
	t.Helper()
	m := NewBedrock(BedrockOptions{Credentials: []aws.Credentials{testAWS}})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	t.Cleanup(m.Close)
	return m, ts
}

// sdkClient is the official AWS SDK's Bedrock Runtime client pointed at the mock: what it can read,
// the real service sends.
func sdkClient(ts *httptest.Server, secret string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(ts.URL),
		Credentials:      credentials.NewStaticCredentialsProvider(testAWS.AccessKeyID, secret, ""),
		HTTPClient:       &http.Client{Transport: ownBody{ts.Client().Transport}},
		RetryMaxAttempts: 1,
	})
}

// ownBody sends a copy of the request body. The SDK closes the body it built as soon as the
// response headers are back (smithy's safe closer), while net/http's write loop may still be
// finishing the request (its last flush, the check for extra body bytes): on loopback, where the
// mock answers within microseconds, that race made the transport close the connection under the
// streamed answer ("use of closed network connection", about 1 in 100 runs at -cpu 4). A real
// Bedrock answers long after the request is written; the proxy sends its own requests.
type ownBody struct{ rt http.RoundTripper }

func (o ownBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return o.rt.RoundTrip(r)
	}
	b, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(b))
	return o.rt.RoundTrip(r)
}

const claudeBody = `{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`

// The AWS SDK's own client signs, sends and reads what the mock answers: the mock's signature
// check accepts the SDK's signature, its answers and its event-stream framing are the real ones.
func TestBedrockMockSpeaksTheSDKsWireFormat(t *testing.T) {
	m, ts := bedrockRig(t)
	c := sdkClient(ts, testAWS.SecretAccessKey)
	ctx := context.Background()
	model := "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

	out, err := c.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String(model), Body: []byte(claudeBody), ContentType: aws.String("application/json")})
	if err != nil {
		t.Fatalf("InvokeModel: %v", err)
	}
	var msg struct {
		Type    string                  `json:"type"`
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(out.Body, &msg); err != nil || msg.Type != "message" || !strings.Contains(msg.Content[0].Text, "Hello") {
		t.Fatalf("answer %s (%v)", out.Body, err)
	}
	if m.Requests(model) != 1 {
		t.Fatalf("the mock saw model %v, want %q", m.counts, model)
	}

	st, err := c.InvokeModelWithResponseStream(ctx, &bedrockruntime.InvokeModelWithResponseStreamInput{ModelId: aws.String(model), Body: []byte(claudeBody), ContentType: aws.String("application/json")})
	if err != nil {
		t.Fatalf("InvokeModelWithResponseStream: %v", err)
	}
	var types_ []string
	for ev := range st.GetStream().Events() {
		chunk, ok := ev.(*types.ResponseStreamMemberChunk)
		if !ok {
			t.Fatalf("event %T", ev)
		}
		var e struct{ Type string }
		_ = json.Unmarshal(chunk.Value.Bytes, &e)
		types_ = append(types_, e.Type)
	}
	if err := st.GetStream().Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := strings.Join(types_, ","); !strings.HasPrefix(got, "message_start,content_block_start,ping,content_block_delta") || !strings.HasSuffix(got, "message_delta,message_stop") {
		t.Fatalf("events %s", got)
	}

	// Errors come back as the SDK's typed exceptions.
	_, err = c.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String("throttled"), Body: []byte(claudeBody)}, func(o *bedrockruntime.Options) {
		o.APIOptions = append(o.APIOptions, addHeader(BehaviorHeader, "429;retry_after=2"))
	})
	var thr *types.ThrottlingException
	if !errors.As(err, &thr) {
		t.Fatalf("429: %v, want a ThrottlingException", err)
	}
	st, err = c.InvokeModelWithResponseStream(ctx, &bedrockruntime.InvokeModelWithResponseStreamInput{ModelId: aws.String("m"), Body: []byte(claudeBody)}, func(o *bedrockruntime.Options) {
		o.APIOptions = append(o.APIOptions, addHeader(BehaviorHeader, "stream_error=modelStreamErrorException;after=2"))
	})
	if err != nil {
		t.Fatal(err)
	}
	for range st.GetStream().Events() {
	}
	var mse *types.ModelStreamErrorException
	if err := st.GetStream().Err(); !errors.As(err, &mse) {
		t.Fatalf("stream error %v, want a ModelStreamErrorException", err)
	}

	// A wrong secret: the mock refuses the signature, as Bedrock does.
	_, err = sdkClient(ts, "wrong-secret").InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String(model), Body: []byte(claudeBody)})
	if err == nil || !strings.Contains(err.Error(), "InvalidSignatureException") || m.Refused() != 1 {
		t.Fatalf("wrong secret: %v (refused %d)", err, m.Refused())
	}
}
