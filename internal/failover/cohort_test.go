package failover

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// disabledHealth is fakeHealth with operator-disabled channels.
type disabledHealth struct {
	fakeHealth
	disabled map[string]bool
}

func (h *disabledHealth) StatusOf(now time.Time, k health.Key) (health.Status, bool) {
	if h.disabled[k.Channel] {
		return health.Status{Key: k, Phase: health.PhaseDisabled}, true
	}
	return h.fakeHealth.StatusOf(now, k)
}

// walkListed is walk for a request of the listed cohort.
func walkListed(t *testing.T, w *world, h Health, model string, outcomes ...Result) string {
	t.Helper()
	var p Plan
	p.Start(w, h, fixedRand(0.5), t0, model)
	p.SetCohort(CohortListed)
	if p.Cohort() != CohortListed {
		t.Fatal("SetCohort(CohortListed) did not take")
	}
	now := t0
	var steps []string
	for range 32 {
		st := p.Next(now)
		switch st.Action {
		case ActionTry:
			steps = append(steps, "try "+st.Channel.Name+"/"+st.Model.Name)
			r := Result{Outcome: health.OutcomeSuccess}
			if len(outcomes) > 0 {
				r, outcomes = outcomes[0], outcomes[1:]
			}
			p.Observe(r)
		case ActionWait:
			steps = append(steps, "wait "+st.Wait.String())
			now = now.Add(st.Wait)
		default:
			steps = append(steps, "stop "+[]string{"", "unavailable", "rate-limited", "pass-through", "unfit", "answered"}[st.Stop])
			return strings.Join(steps, ", ")
		}
	}
	t.Fatal("the plan did not end")
	return ""
}

// TestListedWalk: the listed cohort takes the channels in policy order whatever the engine
// says (ejected a is tried first, and b before c although c is in another failure domain),
// skips only what an operator disabled, keeps the fallback models and maxAttempts, and never
// panics.
func TestListedWalk(t *testing.T) {
	server := fail(health.OutcomeServerError)
	for _, tt := range []struct {
		name     string
		out      []string
		disabled []string
		outcomes []Result
		want     string
	}{
		{"ejected channels are tried", []string{"a", "b"}, nil, nil, "try a/gpt-4o, stop answered"},
		{"the next listed channel on a failure", []string{"a"}, nil, []Result{server}, "try a/gpt-4o, try b/gpt-4o, stop answered"},
		{"in list order, not by failure domain", nil, nil, []Result{server, server}, "try a/gpt-4o, try b/gpt-4o, try c/gpt-4o, stop answered"},
		{"then the fallback model", nil, nil, []Result{server, server, server}, "try a/gpt-4o, try b/gpt-4o, try c/gpt-4o, try d/gpt-4o-mini, stop answered"},
		{"an operator's disable binds every cohort", nil, []string{"a"}, nil, "try b/gpt-4o, stop answered"},
		{"no panic routing: a 503 when every listed channel failed", []string{"a", "b", "c", "d"}, nil, []Result{server, server, server, server}, "try a/gpt-4o, try b/gpt-4o, try c/gpt-4o, try d/gpt-4o-mini, stop unavailable"},
		{"every channel disabled: nothing to try", nil, []string{"a", "b", "c", "d"}, nil, "stop unavailable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &disabledHealth{fakeHealth: fakeHealth{out: map[string]bool{}}, disabled: map[string]bool{}}
			for _, c := range tt.out {
				h.out[c] = true
			}
			for _, c := range tt.disabled {
				h.disabled[c] = true
			}
			if got := walkListed(t, newWorld(nil), h, "gpt-4o", tt.outcomes...); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestChooseCohort(t *testing.T) {
	pol := func(r *routing.Rollout) *routing.Policy { return &routing.Policy{Name: "p", Rollout: r} }
	if c := ChooseCohort(pol(nil), "x"); c != CohortPolicy {
		t.Errorf("no rollout: %s, want policy", c)
	}
	if c := ChooseCohort(pol(&routing.Rollout{DryRun: true, Percent: 100}), "x"); c != CohortListed {
		t.Errorf("DryRun: %s, want listed", c)
	}
	if c := ChooseCohort(pol(&routing.Rollout{Percent: 100}), "x"); c != CohortPolicy {
		t.Errorf("100%%: %s, want policy", c)
	}
	// The share is close to the percent, the choice is stable, and raising the percent only
	// moves requests from listed to policy.
	const n = 20000
	p10, p30 := pol(&routing.Rollout{Percent: 10}), pol(&routing.Rollout{Percent: 30})
	var in10, in30 int
	for i := range n {
		id := fmt.Sprintf("req-%06d", i)
		c10, c30 := ChooseCohort(p10, id), ChooseCohort(p30, id)
		if c10 != ChooseCohort(p10, id) {
			t.Fatalf("%s: the cohort changed between two calls", id)
		}
		if c10 == CohortPolicy {
			in10++
			if c30 != CohortPolicy {
				t.Fatalf("%s: in the policy cohort at 10%% but not at 30%%", id)
			}
		}
		if c30 == CohortPolicy {
			in30++
		}
	}
	if in10 < n*9/100 || in10 > n*11/100 {
		t.Errorf("10%%: %d of %d in the policy cohort", in10, n)
	}
	if in30 < n*28/100 || in30 > n*32/100 {
		t.Errorf("30%%: %d of %d in the policy cohort", in30, n)
	}
}
