package mockprovider

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// VertexOptions configure a Vertex mock.
type VertexOptions struct {
	// Name identifies the mock in answers and the NameHeader (default "vertex-mock").
	Name string
	// Project and Location, when set, are the only ones the mock serves (others: 404).
	Project, Location string
	// ServiceAccounts are the keys the token endpoint accepts, by client_email: a JWT assertion
	// must be signed (RS256) with the matching private key.
	ServiceAccounts map[string]*rsa.PublicKey
	// TokenTTL is the lifetime of the tokens it issues (default 1h).
	TokenTTL time.Duration
	// Now is the mock's clock, for token expiry (default time.Now).
	Now func() time.Time
}

// Vertex is a mock Google Vertex AI for Claude, with its own OAuth token endpoint:
//
//	POST …/token                  the JWT-bearer grant of a service account (token_uri)
//	POST …/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict
//	POST …/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:streamRawPredict
//
// The API checks each request's bearer token: one the token endpoint issued and that has not
// expired. Answers are the Anthropic Messages body and SSE stream; errors are Google's for what
// Vertex refuses (401 UNAUTHENTICATED, 429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE, ...) and
// Anthropic's for what the model answers (529 overloaded_error, 400 invalid_request_error).
// Behaviours as for the Bedrock mock (ParseCloudBehavior); stream_error is an Anthropic error type.
type Vertex struct {
	cloudModels
	opts   VertexOptions
	seq    atomic.Int64
	tmu    sync.Mutex
	tokens map[string]time.Time // token → expiry
	issued atomic.Int64
}

// NewVertex returns a Vertex mock.
func NewVertex(opts VertexOptions) *Vertex {
	if opts.Name == "" {
		opts.Name = "vertex-mock"
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Vertex{cloudModels: newCloudModels(), opts: opts, tokens: map[string]time.Time{}}
}

// TokensIssued is how many tokens the token endpoint handed out.
func (m *Vertex) TokensIssued() int { return int(m.issued.Load()) }

func (m *Vertex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(NameHeader, m.opts.Name)
	if strings.HasSuffix(r.URL.Path, "/token") {
		m.serveToken(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Could not read the request body.")
		return
	}
	project, location, model, op, ok := vertexPath(r.URL.Path)
	if !ok || r.Method != http.MethodPost || (op != "rawPredict" && op != "streamRawPredict") {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
		return
	}
	b, source, berr := m.record(r, model, body)
	if !m.authorized(r) {
		googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED",
			"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	}
	if (m.opts.Project != "" && project != m.opts.Project) || (m.opts.Location != "" && location != m.opts.Location) {
		googleError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Publisher Model `projects/%s/locations/%s/publishers/anthropic/models/%s` not found.", project, location, model))
		return
	}
	if berr != nil {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "mockprovider: invalid "+BehaviorHeader+": "+berr.Error())
		return
	}
	stream := op == "streamRawPredict"
	var req claudeRequest
	var raw map[string]json.RawMessage
	switch {
	case json.Unmarshal(body, &raw) != nil || json.Unmarshal(body, &req) != nil:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "The request body is not valid JSON.")
		return
	case raw["model"] != nil:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "model: Extra inputs are not permitted")
		return
	case req.AnthropicVersion != "vertex-2023-10-16":
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic_version: want vertex-2023-10-16")
		return
	case stream != (req.Stream != nil && *req.Stream):
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "stream: must be true on streamRawPredict and absent or false on rawPredict")
		return
	case req.MaxTokens <= 0:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
		return
	}
	x := &claudeExchange{w: w, r: r, rc: http.NewResponseController(w), b: b, req: req, model: model, name: m.opts.Name,
		id: fmt.Sprintf("vrtx_%d", m.seq.Add(1)), closed: m.closed, frame: sseFraming{}}
	if !x.wait(b.Delay) {
		x.abort(false)
		return
	}
	if m.failFirst(b, source, model) {
		vertexStatus(w, b.Behavior, b.Status)
		return
	}
	switch b.Mode {
	case ModeStatus, ModeRateLimit:
		vertexStatus(w, b.Behavior, b.Status)
	case ModeContextLength:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", b.message("prompt is too long: 210000 tokens > 200000 maximum"))
	case ModeContentPolicy:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", b.message("Output blocked by content filtering policy"))
	case ModeReset:
		x.abort(true)
	case ModeHang:
		x.block()
		x.abort(false)
	default:
		if msg := x.prefillRefusal(); msg != "" {
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
			return
		}
		x.play(stream)
	}
}

func vertexPath(path string) (project, location, model, op string, ok bool) {
	i := strings.LastIndex(path, "/projects/")
	if i < 0 {
		return "", "", "", "", false
	}
	parts := strings.Split(path[i+1:], "/")
	if len(parts) != 8 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "publishers" || parts[5] != "anthropic" || parts[6] != "models" {
		return "", "", "", "", false
	}
	model, op, ok = strings.Cut(parts[7], ":")
	return parts[1], parts[3], model, op, ok
}

func (m *Vertex) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	m.tmu.Lock()
	defer m.tmu.Unlock()
	exp, known := m.tokens[tok]
	return known && m.opts.Now().Before(exp)
}

// serveToken is the OAuth 2 JWT-bearer grant (RFC 7523) a service account's token_uri serves.
func (m *Vertex) serveToken(w http.ResponseWriter, r *http.Request) {
	fail := func(msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": msg})
	}
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		fail("bad request")
		return
	}
	if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		fail("unsupported grant_type")
		return
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		fail("malformed assertion")
		return
	}
	var head struct{ Alg string }
	var claims struct {
		Iss   string `json:"iss"`
		Scope string `json:"scope"`
		Aud   string `json:"aud"`
		Exp   int64  `json:"exp"`
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &head) != nil || json.Unmarshal(cb, &claims) != nil || head.Alg != "RS256" {
		fail("malformed assertion")
		return
	}
	key := m.opts.ServiceAccounts[claims.Iss]
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if key == nil || rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig) != nil {
		fail("Invalid JWT Signature.")
		return
	}
	if !strings.Contains(claims.Scope, "https://www.googleapis.com/auth/cloud-platform") || !strings.HasSuffix(claims.Aud, "/token") ||
		time.Unix(claims.Exp, 0).Before(m.opts.Now()) {
		fail("Invalid JWT: scope, audience or expiry")
		return
	}
	n := m.issued.Add(1)
	tok := fmt.Sprintf("ya29.mock-%d", n)
	m.tmu.Lock()
	m.tokens[tok] = m.opts.Now().Add(m.opts.TokenTTL)
	m.tmu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(m.opts.TokenTTL / time.Second)})
}

// vertexStatus answers status as Vertex does: Google's error for its own refusals, Anthropic's
// overloaded_error for 529.
func vertexStatus(w http.ResponseWriter, b Behavior, status int) {
	if b.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(b.RetryAfter))
	}
	switch status {
	case 529:
		anthropicError(w, status, "overloaded_error", b.message("Overloaded"))
	case http.StatusTooManyRequests:
		googleError(w, status, "RESOURCE_EXHAUSTED", b.message("Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: anthropic-claude. Please submit a quota increase request."))
	case http.StatusUnauthorized:
		googleError(w, status, "UNAUTHENTICATED", b.message("Request had invalid authentication credentials."))
	case http.StatusForbidden:
		googleError(w, status, "PERMISSION_DENIED", b.message("Permission 'aiplatform.endpoints.predict' denied on resource for leaky-sa@my-project.iam.gserviceaccount.com"))
	case http.StatusNotFound:
		googleError(w, status, "NOT_FOUND", b.message("Publisher Model was not found or your project does not have access to it."))
	case http.StatusBadRequest:
		anthropicError(w, status, "invalid_request_error", b.message("The request was rejected by the provider."))
	case http.StatusServiceUnavailable:
		googleError(w, status, "UNAVAILABLE", b.message("The service is currently unavailable."))
	case http.StatusGatewayTimeout:
		googleError(w, status, "DEADLINE_EXCEEDED", b.message("Deadline exceeded."))
	default:
		googleError(w, status, "INTERNAL", b.message("Internal error encountered."))
	}
}

func googleError(w http.ResponseWriter, status int, code, msg string) {
	writeRaw(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": code}})
}

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeRaw(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func writeRaw(w http.ResponseWriter, status int, v any) {
	data, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// sseFraming is the Anthropic API's own SSE, which Vertex streams as it is.
type sseFraming struct{}

func (sseFraming) streamContentType() string { return "text/event-stream; charset=utf-8" }

func (sseFraming) event(typ string, data []byte) []byte {
	return []byte("event: " + typ + "\ndata: " + string(data) + "\n\n")
}

func (sseFraming) streamError(name, message string) []byte {
	data, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": name, "message": message}})
	return []byte("event: error\ndata: " + string(data) + "\n\n")
}

func (sseFraming) garbage() []byte { return []byte("event: content_block_delta\ndata: {not json\n\n") }
