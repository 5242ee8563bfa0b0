package audit

import "unicode/utf8"

// Bounds of what a log line holds of a value someone else chose (a client's model name, client
// id, request id or cohort header, an upstream's error text): enough to tell values apart, never
// enough for one request to make a line that a reader (Open's resume, a log shipper) cannot take.
const (
	// MaxField is the most bytes a client-supplied field takes in an audit or access log line.
	MaxField = 256
	// MaxError is the most bytes an error text takes.
	MaxError = 1024
	// TruncatedMark ends a value that was cut to fit; the bytes before it are the value's start.
	TruncatedMark = "…[truncated]"
)

// Truncate returns s if it fits in max bytes, else its longest start that, with TruncatedMark
// after it, does: the result is at most max bytes and valid UTF-8 where s was (a cut never
// splits a character).
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max - len(TruncatedMark)
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + TruncatedMark
}

// bound cuts every client-supplied string of a request line to MaxField bytes.
func (l *Line) bound() {
	for _, p := range []*string{&l.RequestID, &l.Client, &l.KeyID, &l.Model, &l.Policy, &l.Reason, &l.Residency} {
		*p = Truncate(*p, MaxField)
	}
	for i := range l.Attempts {
		a := &l.Attempts[i]
		a.Channel = Truncate(a.Channel, MaxField)
		a.Outcome = Truncate(a.Outcome, MaxField)
	}
}
