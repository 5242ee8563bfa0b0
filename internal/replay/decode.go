package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
)

// rawLine is one access-log line as decoded. The byte slices point into the line buffer and are
// only valid until the next line is read: the decoder allocates nothing on the common path.
type rawLine struct {
	ts         int64 // Unix ns
	requestID  []byte
	channel    []byte
	model      []byte
	attempt    int
	status     int
	hasStatus  bool
	outcome    health.Outcome
	hasOutcome bool
	latency    time.Duration
	ttft       time.Duration
	stream     bool
	probe      bool // the proxy's own health probe, not a client request (an extension of the contract)
	// retryAfter is a 429's Retry-After (retryAfterMs) and overflow says the error code was
	// context_length_exceeded (errorCode): the failover planner decides on both.
	retryAfter time.Duration
	overflow   bool
	// requested is the model the client asked for when the attempt is on another (a fallback
	// or context-overflow hop; requestedModel), nil otherwise.
	requested []byte
	// continuation numbers an attempt that continued a stream broken after text reached the
	// client (the proxy's stream recovery); 0 for the others.
	continuation int
	// cohortKey is the client's X-Switchyard-Cohort (cohortKey), nil when the request id
	// decided the request's rollout cohort.
	cohortKey []byte
	// timedOut: the error says the attempt ended on one of the proxy's timeouts; a stream that
	// stalled after text reached the client is logged stream_cut, and only its error tells.
	timedOut bool
}

// errLine is a decoding error without allocation for the common cases.
type errLine string

func (e errLine) Error() string { return string(e) }

const (
	errNotObject   errLine = "not a JSON object"
	errTruncated   errLine = "unexpected end of line"
	errSyntax      errLine = "invalid JSON"
	errTrailing    errLine = "data after the JSON object"
	errNoTS        errLine = `missing "ts"`
	errNoChannel   errLine = `missing "channel"`
	errNoModel     errLine = `missing "model"`
	errNoResult    errLine = `missing both "status" and "outcome"`
	errBadTS       errLine = `"ts" is not an RFC 3339 timestamp`
	errBadNumber   errLine = "invalid number"
	errBadStatus   errLine = `"status" is not an HTTP status (0-599)`
	errBadLatency  errLine = `"latencyMs" is negative or too large`
	errWrongType   errLine = "field has the wrong JSON type"
	errDeepNesting errLine = "nesting too deep"
)

// decodeLine parses one JSON object of the access-log format into r. Unknown fields are skipped
// (the proxy may log more than replay needs); known fields with the wrong type are errors.
// "outcome" wins over "status" when both are present: it knows a timeout from a reset.
func decodeLine(b []byte, r *rawLine) error {
	*r = rawLine{}
	d := scanner{b: b}
	d.ws()
	if !d.eat('{') {
		return errNotObject
	}
	var hasTS bool
	d.ws()
	if !d.eat('}') {
		for {
			d.ws()
			key, esc, err := d.str()
			if err != nil {
				return err
			}
			if esc {
				return fmt.Errorf("escaped field name %q is not supported", key)
			}
			d.ws()
			if !d.eat(':') {
				return errSyntax
			}
			d.ws()
			switch string(key) {
			case "ts":
				v, err := d.strValue()
				if err != nil {
					return err
				}
				if r.ts, err = parseTS(v); err != nil {
					return err
				}
				hasTS = true
			case "requestId":
				if r.requestID, err = d.strOrNull(); err != nil {
					return err
				}
			case "channel":
				if r.channel, err = d.strValue(); err != nil {
					return err
				}
			case "model":
				if r.model, err = d.strValue(); err != nil {
					return err
				}
			case "outcome":
				v, err := d.strOrNull()
				if err != nil {
					return err
				}
				if v != nil {
					o, ok := parseOutcome(v)
					if !ok {
						return fmt.Errorf("unknown outcome %q", v)
					}
					r.outcome, r.hasOutcome = o, true
				}
			case "status":
				n, ok, err := d.intOrNull()
				if err != nil {
					return err
				}
				if ok {
					if n < 0 || n > 599 {
						return errBadStatus
					}
					r.status, r.hasStatus = int(n), true
				}
			case "attempt":
				n, _, err := d.intOrNull()
				if err != nil {
					return err
				}
				r.attempt = int(min(max(n, 0), math.MaxInt32))
			case "latencyMs":
				if r.latency, err = d.millis(); err != nil {
					return err
				}
			case "ttftMs":
				if r.ttft, err = d.millis(); err != nil {
					return err
				}
			case "stream":
				if r.stream, err = d.boolOrNull(); err != nil {
					return err
				}
			case "probe":
				if r.probe, err = d.boolOrNull(); err != nil {
					return err
				}
			case "requestedModel":
				if r.requested, err = d.strOrNull(); err != nil {
					return err
				}
			case "continuation":
				n, _, err := d.intOrNull()
				if err != nil {
					return err
				}
				r.continuation = int(min(max(n, 0), math.MaxInt32))
			case "cohortKey":
				if r.cohortKey, err = d.strOrNull(); err != nil {
					return err
				}
			case "retryAfterMs":
				if r.retryAfter, err = d.millis(); err != nil {
					return err
				}
			case "error":
				v, err := d.strOrNull()
				if err != nil {
					return err
				}
				r.timedOut = failover.IsTimeoutError(v)
			case "errorCode":
				v, err := d.strOrNull()
				if err != nil {
					return err
				}
				r.overflow = string(v) == failover.CodeContextLengthExceeded
			default:
				if err := d.skip(0); err != nil {
					return err
				}
			}
			d.ws()
			if d.eat(',') {
				continue
			}
			if d.eat('}') {
				break
			}
			if d.i >= len(d.b) {
				return errTruncated
			}
			return errSyntax
		}
	}
	d.ws()
	if d.i != len(d.b) {
		return errTrailing
	}
	// The proxy judges a stream by its first token, not by how long the answer was (a long answer
	// is not a slow channel); replay must see the same latency the proxy's engine saw.
	if r.stream && r.ttft > 0 {
		r.latency = r.ttft
	}
	switch {
	case !hasTS:
		return errNoTS
	case len(r.channel) == 0:
		return errNoChannel
	case len(r.model) == 0:
		return errNoModel
	case !r.hasOutcome && !r.hasStatus:
		return errNoResult
	}
	if !r.hasOutcome {
		r.outcome = health.OutcomeFromStatus(r.status)
	}
	return nil
}

var outcomeByName = func() map[string]health.Outcome {
	m := map[string]health.Outcome{}
	for o := health.OutcomeSuccess; o <= health.OutcomeMisconfigured; o++ {
		m[o.String()] = o
	}
	return m
}()

func parseOutcome(b []byte) (health.Outcome, bool) {
	o, ok := outcomeByName[string(b)] // no allocation: the compiler knows the key does not escape
	return o, ok
}

// parseTS reads "2026-11-30T10:00:00.120Z" (RFC 3339 with optional fraction and offset) without
// allocating; anything unusual goes through time.Parse.
func parseTS(b []byte) (int64, error) {
	num := func(s []byte) (int, bool) {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	if len(b) >= 20 && b[4] == '-' && b[7] == '-' && (b[10] == 'T' || b[10] == 't') && b[13] == ':' && b[16] == ':' {
		y, ok1 := num(b[0:4])
		mo, ok2 := num(b[5:7])
		d, ok3 := num(b[8:10])
		h, ok4 := num(b[11:13])
		mi, ok5 := num(b[14:16])
		s, ok6 := num(b[17:19])
		i := 19
		frac := 0
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && i < len(b) && b[i] == '.' {
			i++
			digits := 0
			for i < len(b) && b[i] >= '0' && b[i] <= '9' {
				if digits < 9 {
					frac = frac*10 + int(b[i]-'0')
					digits++
				}
				i++
			}
			for ; digits < 9 && digits > 0; digits++ {
				frac *= 10
			}
		}
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60 && s < 60 &&
			i == len(b)-1 && (b[i] == 'Z' || b[i] == 'z') {
			t := time.Date(y, time.Month(mo), d, h, mi, s, frac, time.UTC)
			if t.Day() == d { // 31 February normalises to March: not a date
				return t.UnixNano(), nil
			}
			return 0, errBadTS
		}
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return 0, errBadTS
	}
	return t.UnixNano(), nil
}

// scanner walks one line of JSON.
type scanner struct {
	b []byte
	i int
}

func (d *scanner) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

func (d *scanner) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// str reads a JSON string and returns its raw content (between the quotes) and whether it holds
// escapes; it checks the escapes are well formed.
func (d *scanner) str() ([]byte, bool, error) {
	if !d.eat('"') {
		if d.i >= len(d.b) {
			return nil, false, errTruncated
		}
		return nil, false, errSyntax
	}
	start, esc := d.i, false
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, esc, nil
		case c == '\\':
			esc = true
			d.i++
			if d.i >= len(d.b) {
				return nil, false, errTruncated
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if d.i+5 > len(d.b) {
					return nil, false, errTruncated
				}
				for _, h := range d.b[d.i+1 : d.i+5] {
					if !isHex(h) {
						return nil, false, errSyntax
					}
				}
				d.i += 5
			default:
				return nil, false, errSyntax
			}
		case c < 0x20:
			return nil, false, errSyntax
		default:
			d.i++
		}
	}
	return nil, false, errTruncated
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// strValue reads a string value, unescaping it (rare: allocates) when needed.
func (d *scanner) strValue() ([]byte, error) {
	if d.i < len(d.b) && d.b[d.i] != '"' {
		if err := d.skip(0); err != nil {
			return nil, err
		}
		return nil, errWrongType
	}
	s, esc, err := d.str()
	if err != nil || !esc {
		return s, err
	}
	var out string
	if err := json.Unmarshal(d.b[d.i-len(s)-2:d.i], &out); err != nil {
		return nil, errSyntax
	}
	return []byte(out), nil
}

func (d *scanner) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

func (d *scanner) strOrNull() ([]byte, error) {
	if d.null() {
		return nil, nil
	}
	return d.strValue()
}

// number returns the raw bytes of a JSON number.
func (d *scanner) number() ([]byte, error) {
	start := d.i
	d.eat('-')
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.b) && d.b[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		if d.i >= len(d.b) {
			return nil, errTruncated
		}
		return nil, errBadNumber
	}
	if d.eat('.') && digits() == 0 {
		return nil, errBadNumber
	}
	if d.eat('e') || d.eat('E') {
		if !d.eat('+') {
			d.eat('-')
		}
		if digits() == 0 {
			return nil, errBadNumber
		}
	}
	return d.b[start:d.i], nil
}

// intOrNull reads an integer (a float with a zero fraction is accepted).
func (d *scanner) intOrNull() (int64, bool, error) {
	f, ok, err := d.floatOrNull()
	if err != nil || !ok {
		return 0, ok, err
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false, errBadNumber
	}
	return int64(f), true, nil
}

func (d *scanner) floatOrNull() (float64, bool, error) {
	if d.null() {
		return 0, false, nil
	}
	if d.i < len(d.b) && (d.b[d.i] == '"' || d.b[d.i] == '{' || d.b[d.i] == '[' || d.b[d.i] == 't' || d.b[d.i] == 'f') {
		if err := d.skip(0); err != nil {
			return 0, false, err
		}
		return 0, false, errWrongType
	}
	raw, err := d.number()
	if err != nil {
		return 0, false, err
	}
	// Fast path: plain integers and one fraction, the access log's shapes.
	neg, i, intPart, fracPart, scale, simple := false, 0, int64(0), int64(0), 1.0, true
	if raw[0] == '-' {
		neg, i = true, 1
	}
	for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
		if intPart > 1<<50 {
			simple = false
			break
		}
		intPart = intPart*10 + int64(raw[i]-'0')
	}
	if simple && i < len(raw) && raw[i] == '.' {
		for i++; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
			if scale >= 1e15 {
				simple = false
				break
			}
			fracPart = fracPart*10 + int64(raw[i]-'0')
			scale *= 10
		}
	}
	if simple && i == len(raw) {
		f := float64(intPart) + float64(fracPart)/scale
		if neg {
			f = -f
		}
		return f, true, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false, errBadNumber
	}
	return f, true, nil
}

// skip passes over any JSON value.
func (d *scanner) skip(depth int) error {
	if depth > 64 {
		return errDeepNesting
	}
	if d.i >= len(d.b) {
		return errTruncated
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, _, err := d.str()
		return err
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		d.i++
		d.ws()
		if d.eat(closer) {
			return nil
		}
		for {
			d.ws()
			if c == '{' {
				if _, _, err := d.str(); err != nil {
					return err
				}
				d.ws()
				if !d.eat(':') {
					return errSyntax
				}
				d.ws()
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.ws()
			if d.eat(',') {
				continue
			}
			if d.eat(closer) {
				return nil
			}
			if d.i >= len(d.b) {
				return errTruncated
			}
			return errSyntax
		}
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	default:
		_, err := d.number()
		return err
	}
}

func (d *scanner) literal(s string) error {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return nil
	}
	return errSyntax
}

// millis reads a duration in milliseconds (a JSON number, or null for none).
func (d *scanner) millis() (time.Duration, error) {
	f, ok, err := d.floatOrNull()
	if err != nil || !ok {
		return 0, err
	}
	if f < 0 || f > 1e12 {
		return 0, errBadLatency
	}
	return time.Duration(f * float64(time.Millisecond)), nil
}

// boolOrNull reads true, false or null (false).
func (d *scanner) boolOrNull() (bool, error) {
	switch {
	case d.literal("true") == nil:
		return true, nil
	case d.literal("false") == nil, d.null():
		return false, nil
	}
	if err := d.skip(0); err != nil {
		return false, err
	}
	return false, errWrongType
}
