package replay

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// requestsSeen collects the scored requests of a replay.
type requestsSeen struct{ out []RequestOutcome }

func (r *requestsSeen) Attempt(LoggedAttempt)    {}
func (r *requestsSeen) Transition(Transition)    {}
func (r *requestsSeen) Request(o RequestOutcome) { r.out = append(r.out, o) }

// TestReplayCohortsFollowChooseCohort: a policy rolled out to 50% puts each logged request in the
// cohort failover.ChooseCohort gives its cohortKey (the client's X-Switchyard-Cohort, logged by
// the proxy) or, without one, its request id; a line with neither is keyed by its line number.
// A DryRun policy lists every request.
func TestReplayCohortsFollowChooseCohort(t *testing.T) {
	var l logBuilder
	keyOf := map[string]string{}
	for i := range 1000 {
		ts := t10.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000Z07:00")
		id, key := fmt.Sprintf("r-%d", i), ""
		switch {
		case i%4 == 0:
			key = fmt.Sprintf("session-%d", i/40)
			keyOf[id] = key
			l.raw(fmt.Sprintf(`{"ts":%q,"requestId":%q,"cohortKey":%q,"channel":"openai-direct","model":"gpt-4o","attempt":1,"status":200,"outcome":"success","latencyMs":800}`, ts, id, key))
		case i%4 == 1:
			keyOf[id] = id
			l.raw(fmt.Sprintf(`{"ts":%q,"requestId":%q,"channel":"openai-direct","model":"gpt-4o","attempt":1,"status":200,"outcome":"success","latencyMs":800}`, ts, id))
		default: // no request id: keyed by the line number (1-based)
			keyOf[fmt.Sprintf("line %d", l.lines()+1)] = fmt.Sprintf("line-%d", l.lines()+1)
			l.raw(fmt.Sprintf(`{"ts":%q,"channel":"openai-direct","model":"gpt-4o","attempt":1,"status":200,"outcome":"success","latencyMs":800}`, ts))
		}
	}
	pol := &routing.Policy{Rollout: &routing.Rollout{Percent: 50}}
	for _, tc := range []struct{ rollout, name string }{{"{percent: 50}", "Enforce 50%"}, {"{mode: DryRun}", "DryRun"}} {
		setup, err := NewSetup(mustPolicies(t, chatPolicy+"  rollout: "+tc.rollout+"\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		var seen requestsSeen
		rep, err := Run(context.Background(), setup, bytes.NewReader(l.buf.Bytes()), Options{Observer: &seen})
		if err != nil {
			t.Fatal(err)
		}
		m := rep.Models[0]
		if m.Rollout != tc.name || m.Requests.Requests != 1000 {
			t.Fatalf("%s: rollout %q, requests %+v", tc.rollout, m.Rollout, m.Requests)
		}
		if tc.name == "DryRun" {
			if m.Requests.Listed != 1000 {
				t.Errorf("DryRun: %d of 1000 requests listed", m.Requests.Listed)
			}
			continue
		}
		if m.Requests.Listed < 400 || m.Requests.Listed > 600 {
			t.Errorf("50%%: %d of 1000 requests listed", m.Requests.Listed)
		}
		wrong := 0
		for _, o := range seen.out {
			name := o.ID
			if name == "" {
				name = fmt.Sprintf("line %d", o.Line)
			}
			key, ok := keyOf[name]
			if !ok {
				t.Fatalf("request %q not in the log", name)
			}
			if want := failover.ChooseCohort(pol, key) == failover.CohortListed; o.Listed != want {
				wrong++
				if wrong <= 3 {
					t.Errorf("%s (key %q): listed %v, the proxy's cohort is listed %v", name, key, o.Listed, want)
				}
			}
		}
		if wrong > 0 || len(seen.out) != 1000 {
			t.Errorf("%d of %d requests in another cohort than the proxy's", wrong, len(seen.out))
		}
	}
}
