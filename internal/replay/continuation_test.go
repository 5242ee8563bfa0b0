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
