package replay

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestContinuedStreams: a stream cut after text reached the client and finished by the proxy's
// stream recovery (a logged "continuation" line) is an answered request under a policy that
// recovers streams, a failed one under streamRecovery Error; a continuation line never counts as
// a request of its own.
func TestContinuedStreams(t *testing.T) {
	var l logBuilder
	cut := func(ts time.Time, id string, conts ...string) {
		fmt.Fprintf(&l.buf, `{"ts":%q,"requestId":%q,"channel":"openai-direct","model":"gpt-4o","attempt":1,"status":200,"outcome":"stream_cut","latencyMs":900,"ttftMs":120,"stream":true}`+"\n",
			ts.UTC().Format(time.RFC3339Nano), id)
		for i, o := range conts {
			fmt.Fprintf(&l.buf, `{"ts":%q,"requestId":%q,"channel":"azure-eastus","model":"gpt-4o","attempt":%d,"status":200,"outcome":%q,"latencyMs":400,"ttftMs":90,"stream":true,"continuation":%d}`+"\n",
				ts.Add(time.Duration(i+1)*time.Second).UTC().Format(time.RFC3339Nano), id, i+2, o, i+1)
		}
	}
	cut(t10, "r-continued", "success")
	cut(t10.Add(time.Minute), "r-twice", "stream_cut", "success")
	cut(t10.Add(2*time.Minute), "r-gave-up", "stream_cut", "stream_cut")
	cut(t10.Add(3*time.Minute), "r-plain-cut")
	for _, c := range []struct {
		policy     string
		failed     int64
		failLogged int64
	}{
		{chatPolicy, 2, 2},
		{strings.Replace(chatPolicy, "scenario: chat", "scenario: chat\n  streamRecovery: Error", 1), 4, 2},
		{strings.Replace(chatPolicy, "scenario: chat", "scenario: chat\n  maxContinuations: 1", 1), 3, 2},
	} {
		setup, err := NewSetup(mustPolicies(t, c.policy), nil)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), setup, bytes.NewReader(l.buf.Bytes()), Options{})
		if err != nil {
			t.Fatal(err)
		}
		m := rep.Models[0].Requests
		if m.Requests != 4 || m.FailedWithPolicy != c.failed || m.FailedAsLogged != c.failLogged {
			t.Errorf("policy %q: requests %d, failed with policy %d (want %d), failed as logged %d (want %d)",
				c.policy[len(c.policy)-60:], m.Requests, m.FailedWithPolicy, c.failed, m.FailedAsLogged, c.failLogged)
		}
	}
}

// TestContinuationAsksThePlanner: replay follows a logged continuation only where its planner
// would have sent it (failover.Plan.Continue on the replayed health): a continuation on a channel
// the replayed engine has ejected leaves the stream cut.
func TestContinuationAsksThePlanner(t *testing.T) {
	var l logBuilder
	line := func(ts time.Time, id, channel, outcome string, attempt, continuation int) {
		fmt.Fprintf(&l.buf, `{"ts":%q,"requestId":%q,"channel":%q,"model":"gpt-4o","attempt":%d,"status":200,"outcome":%q,"latencyMs":400,"ttftMs":90,"stream":true,"continuation":%d}`+"\n",
			ts.UTC().Format(time.RFC3339Nano), id, channel, attempt, outcome, continuation)
	}
	// azure-eastus fails ten requests in a row (each failed over to openai-direct): ejected.
	for i := range 10 {
		at := t10.Add(time.Duration(i) * time.Second)
		line(at, fmt.Sprintf("r-%d", i), "openai-direct", "server_error", 1, 0)
		line(at.Add(100*time.Millisecond), fmt.Sprintf("r-%d", i), "azure-eastus", "server_error", 2, 0)
	}
	// Then a stream breaks on openai-direct and the log's proxy continued it on azure-eastus.
	line(t10.Add(20*time.Second), "r-cut", "openai-direct", "stream_cut", 1, 0)
	line(t10.Add(21*time.Second), "r-cut", "azure-eastus", "success", 2, 1)
	setup, err := NewSetup(mustPolicies(t, chatPolicy), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), setup, bytes.NewReader(l.buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Models[0].Requests
	t.Logf("requests %d, failed with policy %d, failed as logged %d", m.Requests, m.FailedWithPolicy, m.FailedAsLogged)
	if m.Requests != 11 || m.FailedWithPolicy != 11 {
		t.Errorf("requests %d (want 11), failed with policy %d (want 11: the continuation went to a channel the replayed engine ejected)", m.Requests, m.FailedWithPolicy)
	}
}

// TestContinuationsDrawOnTheRetryBudget: a continuation is one more request to a provider, and
// the proxy sends it only when the policy's retry budget allows (as a retry): 31 streams cut
// within one second, each continued on the other channel, spend the budget's floor of 30.
func TestContinuationsDrawOnTheRetryBudget(t *testing.T) {
	var l logBuilder
	line := func(ts time.Time, id, channel, outcome string, attempt, continuation int) {
		fmt.Fprintf(&l.buf, `{"ts":%q,"requestId":%q,"channel":%q,"model":"gpt-4o","attempt":%d,"status":200,"outcome":%q,"latencyMs":10,"ttftMs":5,"stream":true,"continuation":%d}`+"\n",
			ts.UTC().Format(time.RFC3339Nano), id, channel, attempt, outcome, continuation)
	}
	// Between the cuts, answered requests keep openai-direct Healthy (the first channel).
	for i := range 31 {
		at := t10.Add(time.Duration(i) * 10 * time.Millisecond)
		id := fmt.Sprintf("r-%d", i)
		line(at, id, "openai-direct", "stream_cut", 1, 0)
		line(at.Add(time.Millisecond), id, "azure-eastus", "success", 2, 1)
		for j := range 9 {
			line(at.Add(time.Duration(2+j)*time.Millisecond), fmt.Sprintf("ok-%d-%d", i, j), "openai-direct", "success", 1, 0)
		}
	}
	// budgetPercent 0: the floor alone, 30 retries in ten seconds.
	setup, err := NewSetup(mustPolicies(t, strings.Replace(chatPolicy, "scenario: chat", "scenario: chat\n  retry: {budgetPercent: 0}", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var traced []TracedAttempt
	rep, err := Run(context.Background(), setup, bytes.NewReader(l.buf.Bytes()), Options{Trace: func(a TracedAttempt) { traced = append(traced, a) }})
	if err != nil {
		t.Fatal(err)
	}
	conts := 0
	for _, a := range traced {
		if a.Continuation > 0 {
			conts++
		}
	}
	m := rep.Models[0].Requests
	if m.Requests != 31*10 || m.FailedWithPolicy != 1 || conts != 30 {
		t.Errorf("requests %d (want 310), failed with policy %d (want 1: the budget refused the last continuation), continuations traced %d (want 30)",
			m.Requests, m.FailedWithPolicy, conts)
	}
}
