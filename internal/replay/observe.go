package replay

import (
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

// Observer sees a replay as it goes, for the analyses built on it (replay --compare, the monthly
// report): every accepted log line, every transition of the engine's journal and every scored
// request, each in the order the replay meets it. The report's aggregates are not enough for
// them: they need each request's verdict by id and every ejection, not the first 1000 events.
//
// The calls come from the replay's one goroutine; an Observer must not call back into it.
type Observer interface {
	// Attempt is called once per accepted line (probes included), in timestamp order, after the
	// engine has taken the line in (or not: Carried says).
	Attempt(LoggedAttempt)
	// Transition is called for every journal entry whose phase changes, in journal order. A
	// transition is stamped with the moment it became due, which can be before the last line
	// already passed to Attempt (by at most one line: the replay reads the journal on every line).
	Transition(Transition)
	// Request is called once per scored request, at the end of its linger (60 s of log time
	// after its first attempt), in the order of the requests' first attempts.
	Request(RequestOutcome)
}

// LoggedAttempt is one accepted access-log line.
type LoggedAttempt struct {
	At        time.Time
	Line      int64 // 1-based line number in the log
	RequestID string
	Channel   string // as the policy names it
	Model     string
	Attempt   int // the logged attempt number (0 when the line gave none)
	Outcome   health.Outcome
	// Latency is what the engine is fed: the time to first token of a streamed attempt that
	// had one, otherwise latencyMs. For a failed attempt that is the time the client lost on it.
	Latency time.Duration
	Probe   bool
	// Carried: the replayed policy would have sent this attempt (or a probe it answers), so the
	// engine observed it.
	Carried bool
}

// Transition is one journal entry that changed a channel×model's phase.
type Transition struct {
	At       time.Time
	Channel  string
	Model    string
	From, To health.Phase
	Reason   string
	Message  string
}

// IsEjection reports whether t takes a key out of rotation by a rule: a trip rule, a rise during
// the ramp, a low health score. A failed probe restarting a cooldown is the same ejection going
// on, not a new one (as the incident scoring counts them).
func (t *Transition) IsEjection() bool {
	return t.To == health.PhaseEjected && t.From != health.PhaseEjected && t.From != health.PhaseProbing
}

// RequestOutcome is one client request's verdicts.
type RequestOutcome struct {
	// ID is the requestId; empty for a line without one. Line (its first attempt's line number)
	// identifies the request in every replay of the same log, ids reused or not.
	ID   string
	Line int64
	At   time.Time // its first logged attempt
	// Model is the model the client asked for; FirstChannel and FirstModel those of the first
	// logged attempt.
	Model        string
	FirstChannel string
	FirstModel   string
	// ClientError: the first attempt was the caller's problem; such a request is left out of
	// every rate and its other fields are false.
	ClientError           bool
	FailedWithoutFailover bool
	FailedAsLogged        bool
	FailedWithPolicy      bool
	// PolicyAttempts is the number of attempts the replayed policy made; PolicyChannel the
	// channel of its last one (the one that answered, when it did not fail).
	PolicyAttempts int
	PolicyChannel  string
	Rerouted       bool
	Assumed        bool
	// Listed: the replayed policy's rollout put the request in the listed cohort.
	Listed bool
}
