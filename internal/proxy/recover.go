package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/proxy/recovery"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// recoveryTraits are the request's fields that decide whether and how a stream may be recovered.
type recoveryTraits struct {
	Temperature    *float64 `json:"temperature"`
	Seed           *int64   `json:"seed"`
	N              *int     `json:"n"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// deterministic: the request asks for the same answer every time, so a regeneration may be
// spliced (and is still checked byte by byte).
func (t recoveryTraits) deterministic() bool {
	return t.Seed != nil || (t.Temperature != nil && *t.Temperature == 0)
}

// unrecoverable says why a broken stream of this request must end with the in-band error ("" if
// it may be recovered).
func unrecoverable(t recoveryTraits, tap *recovery.Tap) string {
	switch {
	case tap.Tool:
		return "a tool call was being streamed"
	case tap.Multi || t.N != nil && *t.N > 1:
		return "the request asks for more than one choice (n > 1)"
	case t.ResponseFormat != nil && t.ResponseFormat.Type == "json_schema":
		return "the answer follows a JSON schema a continuation cannot be validated against"
	}
	return ""
}

// recoverable reports whether a stream of this attempt is watched for recovery.
func (rt *routeState) recoverable(mr *failover.Model) bool {
	p := rt.plan.First().Policy
	return rt.req.Stream && p.StreamRecovery == "Continue" && p.MaxContinuations > 0 && rt.restore == nil &&
		(rt.path == "/chat/completions" || rt.path == clientapi.PathMessages) && mr != nil
}

// continuationBody is the client's request (in the client's API) with the text already sent as
// the final assistant message (merged into the client's own final assistant message, if any).
func continuationBody(body, prefill []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(m["messages"], &msgs); err != nil {
		return nil, err
	}
	text := recovery.AppendRawJSONString(nil, prefill)
	if n := len(msgs); n > 0 && string(msgs[n-1]["role"]) == `"assistant"` {
		last := msgs[n-1]
		var parts []json.RawMessage
		if old, ok := recovery.RawJSONString(last["content"]); ok {
			last["content"] = recovery.AppendRawJSONString(nil, append(slices.Clone(old), prefill...))
		} else if json.Unmarshal(last["content"], &parts) == nil {
			part := append(append([]byte(`{"type":"text","text":`), text...), '}')
			last["content"], _ = json.Marshal(append(parts, part))
		} else {
			last["content"] = text
		}
	} else {
		msgs = append(msgs, map[string]json.RawMessage{"role": json.RawMessage(`"assistant"`), "content": text})
	}
	var err error
	if m["messages"], err = json.Marshal(msgs); err != nil {
		return nil, err
	}
	// The client's output limit is for the whole answer: the continuation may write what is
	// left of it (estimated from the text sent; at least one token).
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		var n int
		if raw, ok := m[k]; ok && json.Unmarshal(raw, &n) == nil && n > 0 {
			m[k] = json.RawMessage(strconv.Itoa(max(1, n-recovery.EstTokens(len(prefill)))))
		}
	}
	return json.Marshal(m)
}

// withContinueFlags asks an OpenAI-compatible server to continue the final assistant message
// instead of starting a new turn after it (vLLM's and SGLang's chat-template options).
func withContinueFlags(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	m["continue_final_message"] = json.RawMessage("true")
	m["add_generation_prompt"] = json.RawMessage("false")
	return json.Marshal(m)
}

// prefillRejected reports whether a continuation's 400 refuses the assistant turn (a model
// without prefill, or whitespace Anthropic will not end on): the channel is passed over for
// prefill, and the request may still be spliced.
func prefillRejected(r *result) bool {
	if r.status != http.StatusBadRequest {
		return false
	}
	b := bytes.ToLower(r.body)
	return bytes.Contains(b, []byte("assistant")) || bytes.Contains(b, []byte("prefill"))
}

// recoverStream finishes a stream that broke after text reached the client, or ends it with the
// in-band error. broken is the attempt that broke, res its result; the answer is the result.
func (rt *routeState) recoverStream(ctx context.Context, broken *attempt, mr *failover.Model, res result) result {
	s := rt.s
	tap := broken.tap
	var traits recoveryTraits
	if body, err := rt.req.BodyFor(rt.req.Model); err == nil {
		_ = json.Unmarshal(body, &traits)
	}
	why := unrecoverable(traits, tap)
	limit := rt.plan.First().Policy.MaxContinuations
	// The continuations of one break share the fallback deadline of the channel that broke: the
	// client waits at most that long for the stream to go on.
	deadline := s.clock.Now().Add(broken.channel.Timeouts.FallbackRequest)
	lastRes := res
	passOver := map[string]bool{} // channels refusing the prefill, or writing another answer
	from := broken.channel.ID()   // the channel the stream last broke on (the budget's rule)
	tap.EndPart()
	for i := 1; why == "" && i <= limit; i++ {
		ch, splice, remaining, w := rt.nextContinuation(mr, deadline, passOver, len(tap.Text) == 0 || traits.deterministic(), from)
		if ch == nil {
			why = w
			break
		}
		a, err := rt.continuationAttempt(broken, ch, mr, splice, i, min(ch.Timeouts.FallbackRequest, remaining))
		if err != nil {
			why = "the continuation request could not be built: " + err.Error()
			break
		}
		r := s.do(ctx, rt.w, a)
		lastRes, from = r, ch.ID()
		if !prefillRejected(&r) && !a.cont.Failed {
			rt.failed(ch, &r) // a refusal of the prefill, or another answer, says nothing against the channel
		}
		switch {
		case r.canceled:
			// The client hung up on the continuation, whose own tokens abandonedTokens counted:
			// the parts before it count too, as the provider bills them.
			rt.abandonedParts(broken, tap)
			r.committed = true
			return r
		case r.outcome == health.OutcomeSuccess:
			rt.recovered(broken, mr, splice)
			r.committed = true
			return r
		case !splice && prefillRejected(&r):
			// A refused prefill is a failed continuation, not one of maxContinuations' tries:
			// the channel is passed over, which bounds these retries by the candidates.
			passOver[ch.ID()] = true
			i--
		case a.cont.Failed && splice:
			why = "the regenerated answer does not begin with the text already sent"
		case a.cont.Failed:
			passOver[ch.ID()] = true // it wrote another answer: not again for this one
		}
		tap.EndPart() // a part of the answer if it added text before it broke
	}
	if why == "" {
		why = fmt.Sprintf("%d continuation(s) failed, the last: %s", limit, lastRes.shown())
	}
	return rt.giveUp(broken, mr, res, why)
}

// nextContinuation decides where the next continuation goes and within what time: nil, and why,
// when the deadline has passed, no channel can continue, or the retry budget is spent. from is
// the channel the stream last broke on.
func (rt *routeState) nextContinuation(mr *failover.Model, deadline time.Time, passOver map[string]bool, spliceOK bool, from string) (ch *routing.Channel, splice bool, remaining time.Duration, why string) {
	s := rt.s
	if remaining = deadline.Sub(s.clock.Now()); remaining <= 0 {
		return nil, false, 0, "no continuation within the request's deadline"
	}
	if ch, splice = rt.continuationTarget(mr, passOver, spliceOK); ch == nil {
		return nil, false, 0, "no channel can continue the answer (none with capabilities.prefill, and the request is not deterministic)"
	}
	// A continuation is one more request to a provider, as a retry is, and the budget's rule is
	// the planner's (Plan.AllowContinuation). Counted only when one is sent.
	if !rt.plan.AllowContinuation(s.clock.Now(), mr, from) {
		s.metrics.BudgetExhausted.WithLabelValues(mr.Policy.Namespace, mr.Name).Inc()
		return nil, false, 0, fmt.Sprintf("the retry budget of policy %s is spent (retry.budgetPercent %d)", mr.Policy.Name, mr.Policy.Retry.BudgetPercent)
	}
	return ch, splice, remaining, ""
}

// recovered counts a stream that a continuation finished, and the parts before it: what no
// usage event of theirs counted already.
func (rt *routeState) recovered(broken *attempt, mr *failover.Model, splice bool) {
	result := recovery.Continued
	if splice {
		result = recovery.Spliced
	}
	rt.s.metrics.Recoveries.WithLabelValues(broken.channel.Namespace, broken.channel.Name, mr.Name, result).Inc()
	if u := broken.tap.PriorUsage(); u.Uncounted.Prompt+u.Uncounted.Completion > 0 || u.Estimated {
		rt.call.priorTokens(int64(u.Uncounted.Prompt), int64(u.Uncounted.Completion), u.Estimated)
	}
}

// giveUp ends a stream that was not recovered with the in-band error, saying why.
func (rt *routeState) giveUp(broken *attempt, mr *failover.Model, res result, why string) result {
	s := rt.s
	s.metrics.Recoveries.WithLabelValues(broken.channel.Namespace, broken.channel.Name, mr.Name, recovery.GaveUp).Inc()
	flusher, _ := rt.w.(http.Flusher)
	s.writeDeadline(rt.w).extend() // the last write's deadline may have passed while the stream was silent
	writeStreamErrorFor(broken, rt.w, flusher, res.shown()+"; not recovered: "+why, nil)
	res.committed = true
	res.outcome = health.OutcomeStreamCut
	return res
}

// continuationTarget asks the planner (failover.Plan.Continue) which channel goes on, on the
// server's clock and with the request's draw.
func (rt *routeState) continuationTarget(mr *failover.Model, passOver map[string]bool, spliceOK bool) (*routing.Channel, bool) {
	s := rt.s
	var rnd failover.Rand = failover.GlobalRand{}
	if s.rand != nil {
		rnd = s.rand(rt.requestID)
	}
	return rt.plan.Continue(failover.ContinueInput{Now: s.clock.Now(), Model: mr, Draw: rnd.Float64(),
		Failed: rt.failedHere, PassOver: passOver, SpliceOK: spliceOK})
}

// abandonedParts counts the parts of a recovered stream that broke before the continuation the
// client abandoned: what no usage event of theirs counted, estimated (Tap.PriorUsage), and a prompt
// none reported from the request's estimate plus the part's prefill.
func (rt *routeState) abandonedParts(broken *attempt, tap *recovery.Tap) {
	u := tap.PriorUsage()
	prompt := u.Uncounted.Prompt
	if !tap.Cur.PromptKnown {
		for _, p := range tap.Parts {
			if !p.PromptKnown {
				prompt += broken.promptEstimate() + recovery.EstTokens(p.Prefill)
			}
		}
	}
	if prompt+u.Uncounted.Completion > 0 {
		rt.call.priorTokens(int64(prompt), int64(u.Uncounted.Completion), true)
	}
}

// continuationAttempt builds the attempt that finishes broken's stream on ch: a prefilled
// continuation, or (splice) the original request again.
func (rt *routeState) continuationAttempt(broken *attempt, ch *routing.Channel, mr *failover.Model, splice bool, n int, timeout time.Duration) (*attempt, error) {
	upstream, _ := ch.Upstream(mr.Name)
	body, err := rt.req.BodyFor(upstream)
	if err != nil {
		return nil, err
	}
	m, _ := ch.Model(mr.Name)
	a := &attempt{channel: ch, adapter: rt.c.adapters[ch.ID()], model: mr.Name, requested: rt.req.Model, upstream: upstream, path: rt.path,
		stream: true, timeout: timeout, header: rt.header, requestID: rt.requestID, number: rt.plan.Attempts() + n, drill: rt.drill,
		redact: rt.c.redact, piiMasked: rt.piiMasked, call: rt.call, caps: m.Capabilities,
		tap: broken.tap, continuation: n, meter: streamMeter{tap: broken.meter.tap}}
	seam := recovery.SpliceSeam(broken.tap.Text)
	var prefill []byte
	if !splice && len(broken.tap.Text) > 0 {
		prefill, seam = recovery.PrefillFor(broken.tap.Text, speaksMessages(ch.Provider))
		if body, err = continuationBody(body, prefill); err != nil {
			return nil, err
		}
	}
	a.body = body
	a.cont = &recovery.ContRelay{Tap: broken.tap, Seam: seam}
	broken.tap.BeginPart(len(prefill))
	if !splice && len(broken.tap.Text) > 0 && !speaksMessages(ch.Provider) {
		t, err := translate(a, a.caps)
		if err != nil {
			return nil, err
		}
		if t.body, err = withContinueFlags(t.body); err != nil {
			return nil, err
		}
		a.translated = t
	}
	return a, nil
}
