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
