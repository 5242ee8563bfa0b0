// Package vertex is the wire adapter for Claude on Google Vertex AI: a provider.Adapter.
//
// It speaks rawPredict and streamRawPredict:
//
//	POST {baseURL}/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict
//	POST {baseURL}/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:streamRawPredict
//
// with baseURL https://{location}-aiplatform.googleapis.com/v1 by default (location "global":
// https://aiplatform.googleapis.com/v1). The body is the Anthropic Messages body with
// anthropic_version "vertex-2023-10-16" and without "model" ("stream": true for a stream); the
// answer is the Anthropic Messages answer, and a stream is the Anthropic API's own SSE, which the
// EventReader passes on event by event.
//
// Requests carry an OAuth 2 bearer token from golang.org/x/oauth2/google: a service-account JSON
// from the channel's Secret (only that credential type is accepted, so a Secret cannot make the
// gateway fetch tokens from elsewhere) or, without one, Application Default Credentials
// (workload identity on GKE, the metadata server). Tokens are cached and refreshed before expiry
// by the oauth2 token source.
//
// The package never logs and never puts a token or key into an error.
package vertex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
)

const (
	// AnthropicVersion is the anthropic_version Vertex AI requires in the body.
	AnthropicVersion = "vertex-2023-10-16"
	// Scope is the OAuth scope of Vertex AI calls.
	Scope = "https://www.googleapis.com/auth/cloud-platform"
	// tokenTimeout bounds one token fetch, whoever waits for it.
	tokenTimeout = 15 * time.Second
)

// Config is one channel's Vertex settings.
type Config struct {
	// Project is the Google Cloud project id (spec.project).
	Project string
	// Region is the location (spec.region): us-east5, europe-west1, global, ...
	Region string
	// BaseURL replaces the endpoint derived from Region (a Private Service Connect endpoint, a
	// test mock); requests go to BaseURL + /projects/...
	BaseURL string
	// Credentials is the service-account JSON of the channel's Secret; "" uses Application
	// Default Credentials (workload identity).
	Credentials string
	// TokenSource, when set, is where tokens come from instead (tests, a shared source).
	TokenSource oauth2.TokenSource
	// HTTPClient fetches tokens (default: a client with a 15s timeout).
	HTTPClient *http.Client
	// Now is the clock for Retry-After dates (default time.Now).
	Now func() time.Time
}

// Adapter is the provider.Adapter for one Vertex channel.
type Adapter struct {
	base    *url.URL
	project string
	region  string
	tokens  oauth2.TokenSource
	now     func() time.Time
}

var _ provider.Adapter = (*Adapter)(nil)

// New builds a channel's adapter. It does not fetch a token: the first request does.
func New(cfg Config) (*Adapter, error) {
	if err := checkProject(cfg.Project); err != nil {
		return nil, err
	}
	if err := checkRegion(cfg.Region); err != nil {
		return nil, err
	}
	base, err := Endpoint(cfg.Region, cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: tokenTimeout}
	}
	ts := cfg.TokenSource
	switch {
	case ts != nil:
	case cfg.Credentials != "":
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, hc)
		creds, err := google.CredentialsFromJSONWithType(ctx, []byte(cfg.Credentials), google.ServiceAccount, Scope)
		if err != nil {
			return nil, errors.New("vertex: the channel's credentials are not a service-account JSON key")
		}
		ts = creds.TokenSource
	default:
		ts = defaultTokens()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Adapter{base: base, project: cfg.Project, region: cfg.Region, tokens: oauth2.ReuseTokenSource(nil, ts), now: now}, nil
}

// Endpoint is the API root: baseURL when set, else the location's regional endpoint.
func Endpoint(region, baseURL string) (*url.URL, error) {
	raw := baseURL
	if raw == "" {
		host := region + "-aiplatform.googleapis.com"
		if region == "global" {
			host = "aiplatform.googleapis.com"
		}
		raw = "https://" + host + "/v1"
	}
	return provider.ParseBaseURL(raw)
}

// defaults is the process's one Application Default Credentials source, shared by every channel
// without a Secret: they all are the pod's identity.
var defaults = &adcSource{find: findDefaults, now: time.Now}

func defaultTokens() oauth2.TokenSource { return defaults }

func findDefaults() (oauth2.TokenSource, error) {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: tokenTimeout})
	creds, err := google.FindDefaultCredentials(ctx, Scope)
	if err != nil {
		return nil, err
	}
	return oauth2.ReuseTokenSource(nil, creds.TokenSource), nil
}

// adcRetry is how long a failure to find the default credentials stands before they are looked
// for again.
const adcRetry = 30 * time.Second

// adcSource finds the Application Default Credentials on first use, not when a config loads:
// finding them may probe the GCE metadata server, which takes seconds off a machine that has
// none, and must not hold up a reload. A failure is looked into again after adcRetry, so a
// metadata server that was away when the proxy started does not disable the channels until a
// restart.
type adcSource struct {
	find func() (oauth2.TokenSource, error)
	now  func() time.Time

	mu     sync.Mutex
	src    oauth2.TokenSource
	err    error
	failed time.Time
}

func (a *adcSource) Token() (*oauth2.Token, error) {
	a.mu.Lock()
	if a.src == nil && (a.err == nil || a.now().Sub(a.failed) >= adcRetry) {
		src, err := a.find()
		if err != nil {
			a.err, a.failed = fmt.Errorf("no Google Application Default Credentials: %w", err), a.now()
		} else {
			a.src, a.err = src, nil
		}
	}
	src, err := a.src, a.err
	a.mu.Unlock()
	if src == nil {
		return nil, err
	}
	return src.Token()
}

// token waits for the cached or refreshed token, never past ctx: the source's own fetch goes on
// (bounded by its client's timeout) and serves the next request.
func (a *Adapter) token(ctx context.Context) (*oauth2.Token, error) {
	type res struct {
		t   *oauth2.Token
		err error
	}
	ch := make(chan res, 1)
	go func() {
		t, err := a.tokens.Token()
		ch <- res{t, err}
	}()
	select {
	case r := <-ch:
		return r.t, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// NewRequest builds the authorized rawPredict or streamRawPredict request.
func (a *Adapter) NewRequest(ctx context.Context, r provider.Request) (*http.Request, error) {
	if r.Model == "" || strings.ContainsAny(r.Model, "/?#") {
		return nil, fmt.Errorf("vertex: model %q is not a Vertex model name", r.Model)
	}
	set := map[string]any{"anthropic_version": AnthropicVersion}
	drop := []string{"model"}
	if r.Stream {
		set["stream"] = true
	} else {
		drop = append(drop, "stream")
	}
	body, err := provider.EditBody(r.Body, set, drop...)
	if err != nil {
		return nil, err
	}
	op := ":rawPredict"
	if r.Stream {
		op = ":streamRawPredict"
	}
	u := *a.base
	u.Path = fmt.Sprintf("%s/projects/%s/locations/%s/publishers/anthropic/models/%s%s", a.base.Path, a.project, a.region, r.Model, op)
	u.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("vertex: building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(r.Beta) > 0 {
		req.Header.Set("anthropic-beta", strings.Join(r.Beta, ","))
	}
	tok, err := a.token(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &provider.Failure{Outcome: health.OutcomeServerError, Code: "CredentialsUnavailable",
			Detail:     "vertex: no OAuth token: " + provider.Summarize(err.Error()),
			ClientType: provider.ClientTypeFor(health.OutcomeServerError), ClientMessage: provider.GenericMessage(health.OutcomeServerError)}
	}
	tok.SetAuthHeader(req)
	return req, nil
}

// googleError is the body of a Google API error answer.
type googleError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// ClassifyError reads a Vertex error answer: either Google's ({"error":{"code","status",...}}),
// for what Vertex itself refuses, or Anthropic's ({"type":"error",...}), for what the model's
// service answered (529 overloaded_error among them).
func (a *Adapter) ClassifyError(status int, header http.Header, body []byte) provider.Failure {
	if e, ok := anthropic.ParseError(body); ok {
		f := provider.ClassifyAnthropicError(status, e)
		if f.Outcome == health.OutcomeRateLimited {
			f.RetryAfter = provider.ParseRetryAfter(header.Get("Retry-After"), a.now())
		}
		return f
	}
	var g googleError
	_ = json.Unmarshal(body, &g)
	f := provider.Failure{Status: status, Code: g.Error.Status}
	withheld := false
	switch g.Error.Status {
	case "RESOURCE_EXHAUSTED":
		f.Outcome = health.OutcomeRateLimited
	case "UNAUTHENTICATED", "PERMISSION_DENIED":
		f.Outcome, withheld = health.OutcomeServerError, true
	case "FAILED_PRECONDITION":
		// The project's state (billing off, the API or the model not enabled): the channel's.
		f.Outcome, withheld = health.OutcomeServerError, true
	case "NOT_FOUND":
		f.Outcome = health.OutcomeMisconfigured
	case "INVALID_ARGUMENT", "OUT_OF_RANGE":
		f.Outcome = health.OutcomeClientError
	case "DEADLINE_EXCEEDED":
		f.Outcome = health.OutcomeTimeout
	case "INTERNAL", "UNAVAILABLE", "UNKNOWN", "ABORTED":
		f.Outcome = health.OutcomeServerError
	default:
		f.Outcome = health.OutcomeFromStatus(status)
		withheld = status == http.StatusUnauthorized || status == http.StatusForbidden
		if f.Code == "" {
			f.Code = http.StatusText(status)
		}
	}
	if f.Outcome == health.OutcomeRateLimited {
		f.RetryAfter = provider.ParseRetryAfter(header.Get("Retry-After"), a.now())
	}
	if withheld {
		f.Detail = fmt.Sprintf("vertex HTTP %d %s: the provider rejected the channel's credentials or project", status, f.Code)
	} else {
		f.Detail = fmt.Sprintf("vertex HTTP %d %s: %s", status, f.Code, provider.Summarize(g.Error.Message))
	}
	f.ClientType = provider.ClientTypeFor(f.Outcome)
	if f.Outcome == health.OutcomeClientError && g.Error.Message != "" {
		f.ClientMessage = g.Error.Message
	} else {
		f.ClientMessage = provider.GenericMessage(f.Outcome)
	}
	return f
}

// DecodeStream reads streamRawPredict's answer, the Anthropic SSE stream.
func (a *Adapter) DecodeStream(resp *http.Response) (provider.EventReader, error) {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, &provider.Failure{Outcome: health.OutcomeServerError, Status: resp.StatusCode, Code: "UnexpectedContentType",
			Detail:     fmt.Sprintf("vertex: a streamed answer with Content-Type %q, want text/event-stream", ct),
			ClientType: provider.ClientTypeFor(health.OutcomeServerError), ClientMessage: provider.GenericMessage(health.OutcomeServerError)}
	}
	return provider.NewSSEReader(resp.Body), nil
}
