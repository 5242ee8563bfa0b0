package proxy

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/internal/audit"
)

// accessLogLine is one upstream attempt, in the contract's format (switchyard replay reads it).
type accessLogLine struct {
	TS        time.Time `json:"ts"`
	RequestID string    `json:"requestId"`
	Channel   string    `json:"channel"`
	Model     string    `json:"model"`
	// RequestedModel is the model the client asked for, when the attempt is on another (a
	// fallback or context-overflow hop): replay walks the request from it.
	RequestedModel string `json:"requestedModel,omitempty"`
	Attempt        int    `json:"attempt"`
	Status         int    `json:"status"`
	Outcome        string `json:"outcome"`
	LatencyMs      int64  `json:"latencyMs"`
	TTFTMs         int64  `json:"ttftMs"`
	Stream         bool   `json:"stream"`
	Probe          bool   `json:"probe,omitempty"`
	Error          string `json:"error,omitempty"`
	// ErrorCode is a 4xx's error code (context_length_exceeded, ...) and RetryAfterMs a 429's
	// Retry-After: replay's failover planner needs both to decide as the proxy did.
	ErrorCode    string `json:"errorCode,omitempty"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
	// PII counts the values masked in the request, per detector; absent when none was.
	PII map[string]int `json:"pii,omitempty"`
	// Continuation numbers an attempt that continues (or regenerates) a stream that broke after
	// text reached the client (1, 2, ...; absent on other attempts).
	Continuation int `json:"continuation,omitempty"`
	// Estimated marks an attempt whose tokens no usage event reported (a stream the client
	// abandoned): Tokens are the estimates counted against the client's token limits.
	Estimated bool          `json:"estimated,omitempty"`
	Tokens    *accessTokens `json:"tokens,omitempty"`
	// CohortKey is the client's X-Switchyard-Cohort header when it sent a usable one: the rollout
	// cohort of the request is a hash of it instead of the request id (failover.ChooseCohort), so
	// replay needs it to put the request in the cohort the proxy did. Absent otherwise: the
	// request id decides.
	CohortKey string `json:"cohortKey,omitempty"`
}

// bound cuts the fields a client or an upstream chose, as the audit log does: a line stays
// readable whatever a request carried.
func (line *accessLogLine) bound() {
	for _, p := range []*string{&line.RequestID, &line.Channel, &line.Model, &line.RequestedModel, &line.Outcome, &line.ErrorCode, &line.CohortKey} {
		*p = audit.Truncate(*p, audit.MaxField)
	}
	line.Error = audit.Truncate(line.Error, audit.MaxError)
}

// accessLog writes one JSON line per attempt with a single Write, so lines never interleave.
type accessLog struct {
	mu sync.Mutex
	w  io.Writer
}

func newAccessLog(w io.Writer) *accessLog {
	if w == nil {
		return nil
	}
	return &accessLog{w: w}
}

func (l *accessLog) write(line *accessLogLine) {
	if l == nil {
		return
	}
	line.bound()
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	_, _ = l.w.Write(b)
	l.mu.Unlock()
}

// accessTokens are an attempt's estimated tokens (accessLogLine.Tokens).
type accessTokens struct {
	Prompt     int `json:"prompt"`
	Completion int `json:"completion"`
}
