package failover

import (
	"bytes"
	"errors"
)

// The errors of an attempt that ended on one of its timeouts, as the proxy ends it and logs it
// (the access log's error): a stream that stalled after text reached the client is logged as a
// cut stream, and only its error says it timed out, which a continuation's choice needs (a
// channel that timed out gets no second try, Plan.Continue). Replay reads them back with
// IsTimeoutError; one copy of the words keeps the two from drifting.
var (
	ErrFirstByte  = errors.New("no response headers or first event within the firstByte timeout")
	ErrStreamIdle = errors.New("stream idle longer than the streamIdle timeout")
	ErrAttempt    = errors.New("attempt exceeded its request timeout")
)

// DeadlineExceeded begins the error of an attempt whose transport's own deadline passed.
const DeadlineExceeded = "deadline exceeded "

// IsTimeoutError reports whether an attempt's logged error says it ended on a timeout.
func IsTimeoutError(msg []byte) bool {
	for _, e := range []error{ErrStreamIdle, ErrAttempt, ErrFirstByte} {
		if bytes.HasPrefix(msg, []byte(e.Error())) {
			return true
		}
	}
	return bytes.HasPrefix(msg, []byte(DeadlineExceeded))
}
