// Package mockprovider is an OpenAI-compatible LLM provider that misbehaves on
// purpose, over real HTTP, for Switchyard's tests, demo and end-to-end suite. It
// speaks Anthropic's Messages API too (messages.go).
//
// A *Server is an http.Handler. It answers POST /v1/chat/completions (streamed
// or not), /v1/completions, /v1/embeddings, /v1/responses, /v1/messages (streamed
// or not), /v1/messages/count_tokens and GET /v1/models,
// also under a prefix (the path is matched on what follows its last "/v1/"),
// in each API's wire format as its official SDKs parse it: embeddings as floats
// or base64, the Responses API's full event sequence (responses.go), tool calls
// when tools are offered (tools.go), an instance of the schema when structured
// output is asked for (structured.go).
// How it answers is a Behavior, set per model (SetBehavior), by default
// (SetDefault), per request (header X-Mock-Behavior, see ParseBehavior), or at
// run time through the control endpoints under /_mock/.
//
// In tests, close the mock before the httptest server, so hung and stalled
// handlers are released:
//
//	mock := mockprovider.New(mockprovider.Options{Name: "a"})
//	ts := httptest.NewServer(mock)
//	defer ts.Close()
//	defer mock.Close() // runs first
package mockprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// BehaviorHeader is the request header that overrides the behaviour for one request.
const BehaviorHeader = "X-Mock-Behavior"

// NameHeader is the response header naming the mock (Options.Name) that answered.
const NameHeader = "X-Mock-Name"

// maxBody bounds the request bodies the mock reads.
const maxBody = 8 << 20

// Options configure a Server.
type Options struct {
	// Name identifies the mock: it is in the NameHeader response header and in
	// the answer text ("Hello from <Name> ..."). Default "mockprovider".
	Name string
	// APIKey, when set, must arrive as "Authorization: Bearer <key>",
	// "api-key: <key>" or "x-api-key: <key>"; otherwise the mock answers 401.
	APIKey string
	// Models are listed by GET /v1/models, with every model that has a
	// behaviour set. Default: gpt-4o, gpt-4o-mini, text-embedding-3-small.
	Models []string
}

// Server is the mock provider. It is safe for concurrent use.
type Server struct {
	opts Options
	seq  atomic.Int64

	closeOnce sync.Once
	closed    chan struct{}

	mu          sync.Mutex
	def         Behavior
	perModel    map[string]Behavior
	progress    map[string]progress // FailFirst and BreakFirst progress, by source+model
	counts      map[string]int
	total       int
	lastHeaders http.Header
	lastBody    []byte
}

// New returns a mock provider that answers every model normally until told otherwise.
func New(opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "mockprovider"
	}
	return &Server{
		opts:     opts,
		closed:   make(chan struct{}),
		perModel: map[string]Behavior{},
		progress: map[string]progress{},
		counts:   map[string]int{},
	}
}

// Name returns Options.Name (or its default).
func (s *Server) Name() string { return s.opts.Name }

// SetBehavior sets the behaviour for requests whose body names model, and
// restarts its FailFirst progress. Model "" is the same as SetDefault.
// An invalid behaviour (see Behavior.Validate) makes the mock answer 500.
func (s *Server) SetBehavior(model string, b Behavior) {
	if model == "" {
		s.SetDefault(b)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perModel[model] = b
	delete(s.progress, failKey("", model))
}

// ClearBehavior removes model's own behaviour: the default applies again.
func (s *Server) ClearBehavior(model string) {
	if model == "" {
		s.SetDefault(Behavior{})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.perModel, model)
	delete(s.progress, failKey("", model))
}

// SetDefault sets the behaviour for models without one of their own, and
// restarts their FailFirst progress.
func (s *Server) SetDefault(b Behavior) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = b
	for k := range s.progress {
		src, model, _ := strings.Cut(k, "\x00")
		if _, own := s.perModel[model]; src == "" && !own {
			delete(s.progress, k)
		}
	}
}

// ClearBehaviors puts every model back to normal answers.
func (s *Server) ClearBehaviors() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = Behavior{}
	s.perModel = map[string]Behavior{}
	s.progress = map[string]progress{}
}

// BehaviorFor returns the behaviour configured for model (its own, or the default).
func (s *Server) BehaviorFor(model string) Behavior {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.perModel[model]; ok {
		return b
	}
	return s.def
}

// Requests returns how many API requests named model in their body ("" for
// those that named none, such as GET /v1/models), failed ones included.
func (s *Server) Requests(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[model]
}

// Total returns how many API requests the mock received (control endpoints excluded).
func (s *Server) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Counts returns a copy of the request counts per model.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// LastHeaders returns a copy of the headers of the last API request (nil if none).
func (s *Server) LastHeaders() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastHeaders.Clone()
}

// LastBody returns a copy of the body of the last API request (nil if none): what a test asserts
// went upstream.
func (s *Server) LastBody() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.lastBody...)
}

// Reset forgets the counts, the last headers and body, and the FailFirst progress.
// Behaviours stay (see ClearBehaviors).
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = map[string]int{}
	s.total = 0
	s.lastHeaders = nil
	s.lastBody = nil
	s.progress = map[string]progress{}
}

// Close releases every handler that hangs, stalls or waits, closing its
// connection; later hang/stall requests are cut at once. Normal answers still
// work. Close is idempotent. Call it before httptest.Server.Close, which waits
// for active handlers.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

func failKey(source, model string) string { return source + "\x00" + model }

// progress is how many requests of one source and model FailFirst failed and BreakFirst broke.
type progress struct{ failed, broke int }

// breaks reports whether a mode breaks a stream (what BreakFirst limits).
func breaks(m Mode) bool {
	return m == ModeCut || m == ModeStall || m == ModeGarbage || m == ModeErrorEvent
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(NameHeader, s.opts.Name)
	if i := strings.LastIndex(r.URL.Path, "/_mock/"); i >= 0 {
		s.serveControl(w, r, r.URL.Path[i+len("/_mock/"):])
		return
	}
	x := &exchange{s: s, w: w, r: r, rc: http.NewResponseController(w)}
	x.serve()
}

// apiRequest is what the mock reads from a request body.
type apiRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages   json.RawMessage `json:"messages"`
	System     json.RawMessage `json:"system"` // Messages API
	Tools      json.RawMessage `json:"tools"`
	Prompt     json.RawMessage `json:"prompt"`
	Input      json.RawMessage `json:"input"`
	Dimensions int             `json:"dimensions"`
	// EncodingFormat is the embeddings' "float" (the default) or "base64".
	EncodingFormat string `json:"encoding_format"`
	// Structured output (structured.go) and the tool to call (tools.go).
	ResponseFormat json.RawMessage `json:"response_format"` // chat
	TextConfig     json.RawMessage `json:"text"`            // Responses: {"format"}
	OutputConfig   json.RawMessage `json:"output_config"`   // Messages: {"format"}
	OutputFormat   json.RawMessage `json:"output_format"`   // Messages, beta
	ToolChoice     json.RawMessage `json:"tool_choice"`
}

type endpoint int

const (
	epUnknown endpoint = iota
	epChat
	epCompletions
	epEmbeddings
	epResponses
	epModels
	epMessages    // Anthropic's Messages API (messages.go)
	epCountTokens // and its token count
)

func endpointOf(path string) endpoint {
	i := strings.LastIndex(path, "/v1/")
	if i < 0 {
		return epUnknown
	}
	switch strings.TrimSuffix(path[i+len("/v1/"):], "/") {
	case "chat/completions":
		return epChat
	case "completions":
		return epCompletions
	case "embeddings":
		return epEmbeddings
	case "responses":
		return epResponses
	case "models":
		return epModels
	case "messages":
		return epMessages
	case "messages/count_tokens":
		return epCountTokens
	}
	return epUnknown
}

// exchange is one API request being answered.
type exchange struct {
	s    *Server
	w    http.ResponseWriter
	r    *http.Request
	rc   *http.ResponseController
	ep   endpoint
	req  apiRequest
	body []byte
	b    Behavior // normalised
	id   int64
}

func (x *exchange) serve() {
	s, r := x.s, x.r
	x.id = s.seq.Add(1)
	x.ep = endpointOf(r.URL.Path)

	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	x.body = body
	var parseErr error
	if readErr == nil && len(body) > maxBody {
		readErr = fmt.Errorf("request body over %d bytes", maxBody)
	}
	if readErr == nil && len(strings.TrimSpace(string(body))) > 0 {
		parseErr = json.Unmarshal(body, &x.req)
		if parseErr != nil {
			// Still count the model when the rest is odd.
			var m struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal(body, &m)
			x.req = apiRequest{Model: m.Model}
		}
	}

	// Record what was seen, then decide the behaviour.
	hdr := r.Header.Get(BehaviorHeader)
	s.mu.Lock()
	s.counts[x.req.Model]++
	s.total++
	s.lastHeaders = r.Header.Clone()
	s.lastBody = append(s.lastBody[:0:0], body...)
	var b Behavior
	source := ""
	if hdr == "" {
		if own, ok := s.perModel[x.req.Model]; ok {
			b = own
		} else {
			b = s.def
		}
	}
	s.mu.Unlock()

	if hdr != "" {
		var err error
		b, err = ParseBehavior(hdr)
		if err != nil {
			x.errorJSON(http.StatusBadRequest, "invalid_request_error", "", "", "mockprovider: invalid "+BehaviorHeader+" header: "+err.Error())
			return
		}
		source = "hdr:" + strings.TrimSpace(hdr)
	} else if err := b.Validate(); err != nil {
		x.errorJSON(http.StatusInternalServerError, "server_error", "", "", "mockprovider: invalid behavior configured: "+err.Error())
		return
	}
	x.b = b.normalized()
	x.structure()

	if !x.authorized() {
		x.errorJSON(http.StatusUnauthorized, "invalid_request_error", "", "invalid_api_key",
			"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.")
		return
	}
	switch {
	case readErr != nil:
		x.errorJSON(http.StatusBadRequest, "invalid_request_error", "", "", "Could not read the request body: "+readErr.Error())
		return
	case x.ep == epUnknown:
		x.errorJSON(http.StatusNotFound, "invalid_request_error", "", "unknown_url", fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
		return
	case x.ep == epModels && r.Method != http.MethodGet,
		x.ep != epModels && r.Method != http.MethodPost:
		allow := http.MethodPost
		if x.ep == epModels {
			allow = http.MethodGet
		}
		x.w.Header().Set("Allow", allow)
		x.errorJSON(http.StatusMethodNotAllowed, "invalid_request_error", "", "method_not_allowed", fmt.Sprintf("Method %s not allowed on %s", r.Method, r.URL.Path))
		return
	case x.ep != epModels && parseErr != nil:
		x.errorJSON(http.StatusBadRequest, "invalid_request_error", "", "", "We could not parse the JSON body of your request: "+parseErr.Error())
		return
	case x.ep != epModels && x.req.Model == "":
		x.errorJSON(http.StatusBadRequest, "invalid_request_error", "model", "", "you must provide a model parameter")
		return
	}

	if !x.wait(x.b.Delay) {
		x.abort(false)
		return
	}
	if x.b.FailFirst > 0 {
		key := failKey(source, x.req.Model)
		s.mu.Lock()
		p := s.progress[key]
		fail := p.failed < x.b.FailFirst
		if fail {
			p.failed++
			s.progress[key] = p
		}
		s.mu.Unlock()
		if fail {
			x.statusError(x.b.Status)
			return
		}
	}
	if x.b.BreakFirst > 0 && breaks(x.b.Mode) {
		key := failKey(source, x.req.Model)
		s.mu.Lock()
		p := s.progress[key]
		if p.broke < x.b.BreakFirst {
			p.broke++
			s.progress[key] = p
		} else {
			x.b.Mode = ModeOK // broken enough: answer in full
		}
		s.mu.Unlock()
	}

	switch x.b.Mode {
	case ModeStatus, ModeRateLimit:
		x.statusError(x.b.Status)
	case ModeErrorEvent:
		if !x.req.Stream {
			x.statusError(x.b.Status)
			return
		}
		x.answer()
	case ModeContextLength:
		if x.ep == epMessages || x.ep == epCountTokens {
			x.errorJSON(http.StatusBadRequest, "invalid_request_error", "", "", x.message("prompt is too long: 208310 tokens > 200000 maximum"))
			return
		}
		x.errorJSON(http.StatusBadRequest, "invalid_request_error", "messages", "context_length_exceeded", x.message(
			"This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages."))
	case ModeContentPolicy:
		x.errorJSON(http.StatusBadRequest, "invalid_request_error", "prompt", "content_policy_violation", x.message(
			"Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system."))
	case ModeContinue:
		if !x.refusePrefill() {
			x.answer()
		}
	case ModeReset:
		x.abort(true)
	case ModeHang:
		x.block()
		x.abort(false)
	default:
		x.answer()
	}
}

func (x *exchange) authorized() bool {
	key := x.s.opts.APIKey
	if key == "" {
		return true
	}
	if h := x.r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) == key {
			return true
		}
	}
	return x.r.Header.Get("api-key") == key || x.r.Header.Get("x-api-key") == key
}

func (x *exchange) message(def string) string {
	if x.b.Message != "" {
		return x.b.Message
	}
	return def
}

// wait waits d, or less if the client goes away or the Server is closed (then false).
func (x *exchange) wait(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-x.r.Context().Done():
		return false
	case <-x.s.closed:
		return false
	}
}

// block waits until the client goes away or the Server is closed.
func (x *exchange) block() {
	select {
	case <-x.r.Context().Done():
	case <-x.s.closed:
	}
}

// abort closes the connection without completing the response; with reset,
// as a TCP reset (SO_LINGER 0).
func (x *exchange) abort(reset bool) {
	conn, _, err := x.rc.Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): let net/http abort the stream.
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// statusError answers status with the OpenAI error body matching it.
func (x *exchange) statusError(status int) {
	typ, code, msg := "server_error", "", "The server had an error while processing your request. Sorry about that!"
	switch {
	case status == http.StatusTooManyRequests:
		typ, code, msg = "requests", "rate_limit_exceeded",
			"Rate limit reached for requests on "+x.modelOr("this model")+". Please try again later."
	case status == http.StatusServiceUnavailable:
		msg = "The engine is currently overloaded, please try again later."
	case status == http.StatusUnauthorized:
		typ, code, msg = "invalid_request_error", "invalid_api_key", "Incorrect API key provided."
	case status == http.StatusForbidden:
		typ, code, msg = "permission_error", "", "You are not allowed to use this model."
	case status == http.StatusNotFound:
		typ, code, msg = "invalid_request_error", "model_not_found", "The model `"+x.modelOr("")+"` does not exist or you do not have access to it."
	case status < 500:
		typ, msg = "invalid_request_error", "The request was rejected by the provider."
	}
	if x.b.RetryAfter > 0 {
		x.w.Header().Set("Retry-After", fmt.Sprint(x.b.RetryAfter))
	}
	x.errorJSON(status, typ, "", code, x.message(msg))
}

func (x *exchange) modelOr(def string) string {
	if x.req.Model != "" {
		return x.req.Model
	}
	return def
}

// errorJSON writes an OpenAI-style error body. Empty param and code are null.
func (x *exchange) errorJSON(status int, typ, param, code, msg string) {
	if x.ep == epMessages || x.ep == epCountTokens {
		writeJSON(x.w, status, map[string]any{"type": "error", "error": map[string]any{"type": messagesErrorType(status, code), "message": msg}})
		return
	}
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	writeJSON(x.w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nullable(param), "code": nullable(code),
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":{"message":"mockprovider: encoding failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(data)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// --- control endpoints ---

// Stats is the JSON of GET /_mock/stats.
type Stats struct {
	Name        string              `json:"name"`
	Total       int                 `json:"total"`
	Requests    map[string]int      `json:"requests"`
	LastHeaders map[string][]string `json:"last_headers,omitempty"`
}

// BehaviorUpdate is the JSON body of POST /_mock/behavior. A missing or null
// Behavior clears the model's own behaviour (for model "": resets the default).
type BehaviorUpdate struct {
	Model    string    `json:"model"`
	Behavior *Behavior `json:"behavior"`
}

// BehaviorConfig is the JSON of GET /_mock/behavior.
type BehaviorConfig struct {
	Default  Behavior            `json:"default"`
	PerModel map[string]Behavior `json:"models"`
}

func (s *Server) serveControl(w http.ResponseWriter, r *http.Request, what string) {
	ctlErr := func(status int, msg string) {
		writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
	}
	what = strings.TrimSuffix(what, "/")
	switch {
	case what == "stats" && r.Method == http.MethodGet:
		s.mu.Lock()
		st := Stats{Name: s.opts.Name, Total: s.total, Requests: map[string]int{}, LastHeaders: s.lastHeaders.Clone()}
		for k, v := range s.counts {
			st.Requests[k] = v
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, st)
	case what == "behavior" && r.Method == http.MethodGet:
		s.mu.Lock()
		cfg := BehaviorConfig{Default: s.def, PerModel: map[string]Behavior{}}
		for k, v := range s.perModel {
			cfg.PerModel[k] = v
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, cfg)
	case what == "behavior" && r.Method == http.MethodPost:
		var u BehaviorUpdate
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&u); err != nil {
			ctlErr(http.StatusBadRequest, "mockprovider: bad behavior update: "+err.Error())
			return
		}
		if u.Behavior == nil {
			s.ClearBehavior(u.Model)
		} else {
			if err := u.Behavior.Validate(); err != nil {
				ctlErr(http.StatusBadRequest, "mockprovider: invalid behavior: "+err.Error())
				return
			}
			s.SetBehavior(u.Model, *u.Behavior)
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	case what == "reset" && r.Method == http.MethodPost:
		s.Reset()
		if v := r.URL.Query().Get("behaviors"); v == "1" || v == "true" {
			s.ClearBehaviors()
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	case what == "stats" || what == "behavior" || what == "reset":
		ctlErr(http.StatusMethodNotAllowed, "mockprovider: method not allowed")
	default:
		ctlErr(http.StatusNotFound, "mockprovider: unknown control endpoint "+r.URL.Path)
	}
}

// --- running as a process ---

// ListenAndServe serves s on addr until ctx is done, then closes s (releasing
// hung handlers) and shuts the HTTP server down. It returns nil after a
// shutdown caused by ctx, or the error that stopped the server.
func ListenAndServe(ctx context.Context, addr string, s Mock) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, s)
}

// Mock is any of the package's mocks: the OpenAI/Anthropic Server, the Bedrock and Vertex ones.
type Mock interface {
	http.Handler
	// Close releases hung handlers.
	Close()
}

// Serve is ListenAndServe on a listener the caller opened; it closes ln.
func Serve(ctx context.Context, ln net.Listener, s Mock) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return err
	case <-ctx.Done():
	}
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		_ = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// modelList is the GET /v1/models listing.
func (s *Server) modelList() []string {
	set := map[string]bool{}
	models := s.opts.Models
	if len(models) == 0 {
		models = []string{"gpt-4o", "gpt-4o-mini", "text-embedding-3-small"}
	}
	for _, m := range models {
		set[m] = true
	}
	s.mu.Lock()
	for m := range s.perModel {
		set[m] = true
	}
	s.mu.Unlock()
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
