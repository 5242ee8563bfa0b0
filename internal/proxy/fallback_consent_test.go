package proxy

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Cross-namespace fallback, over real HTTP against mock providers. Three teams, each with its
// own Secret and channels:
//
//	team-a/chan-a  → mock A, serves gpt-4o          (team-a/chat routes gpt-4o)
//	team-b/chan-b  → mock B, serves gpt-4o-mini     (team-b/mini routes gpt-4o-mini)
//	team-b/chan-kz → mock C, serves gpt-4o-mini, residency kz
//	team-c/chan-c  → mock C, serves gpt-4.1         (team-c/big routes gpt-4.1)

const keyC = "sk-test-provider-c-55e1"

// teams are the specs (YAML, unindented) added to the fixed parts above.
type teams struct {
	chanA, chanB     string // appended to team-a/chan-a's and team-b/chan-b's spec
	chat, mini, big  string // appended to the three policies' specs
	chatFallback     string // team-a/chat's fallbackModels; default [gpt-4o-mini]
	miniChannelsList string // team-b/mini's channels; default [{name: chan-b}]
}

func (c teams) render(aURL, bURL, cURL string) string {
	if c.chatFallback == "" {
		c.chatFallback = "[gpt-4o-mini]"
	}
	if c.miniChannelsList == "" {
		c.miniChannelsList = "[{name: chan-b}]"
	}
	return strings.NewReplacer(
		"${A}", aURL, "${B}", bURL, "${C}", cURL, "${KA}", keyA, "${KB}", keyB, "${KC}", keyC, "${TIMEOUTS}", defaultTimeouts,
		"${CHAN_A}", indent(c.chanA), "${CHAN_B}", indent(c.chanB),
		"${CHAT}", indent(c.chat), "${MINI_CHANNELS}", c.miniChannelsList, "${CHAT_FALLBACK}", c.chatFallback, "${MINI}", indent(c.mini), "${BIG}", indent(c.big),
	).Replace(`apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: team-a}
stringData: {a: ${KA}}
---
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: team-b}
stringData: {b: ${KB}, c: ${KC}}
---
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: team-c}
stringData: {c: ${KC}}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: chan-a, namespace: team-a}
spec:
  provider: openai
  baseURL: ${A}/v1
  credentialsRef: {name: keys, key: a}
  models: [{name: gpt-4o}]
  ${TIMEOUTS}
${CHAN_A}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: chan-b, namespace: team-b}
spec:
  provider: azure-openai
  baseURL: ${B}/openai/v1
  credentialsRef: {name: keys, key: b}
  models: [{name: gpt-4o-mini}]
  ${TIMEOUTS}
${CHAN_B}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: chan-kz, namespace: team-b}
spec:
  provider: openai
  baseURL: ${C}/v1
  credentialsRef: {name: keys, key: c}
  models: [{name: gpt-4o-mini}]
  residency: kz
  ${TIMEOUTS}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: chan-c, namespace: team-c}
spec:
  provider: openai
  baseURL: ${C}/v1
  credentialsRef: {name: keys, key: c}
  models: [{name: gpt-4.1}]
  ${TIMEOUTS}
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat, namespace: team-a}
spec:
  models: [gpt-4o]
  channels: [{name: chan-a}]
  fallbackModels: ${CHAT_FALLBACK}
  retry: {maxAttempts: 4}
${CHAT}
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: mini, namespace: team-b}
spec:
  models: [gpt-4o-mini]
  channels: ${MINI_CHANNELS}
  strategy: Priority
${MINI}
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: big, namespace: team-c}
spec:
  models: [gpt-4.1]
  channels: [{name: chan-c}]
${BIG}
`)
}

// teamRig is the rig's proxy and mocks A and B, plus mock C, serving the teams' manifests.
type teamRig struct {
	*rig
	C    *mockprovider.Server
	cURL string
}

func newTeamRig(t *testing.T) *teamRig {
	t.Helper()
	r := &teamRig{rig: newRig(t, rigConfig{}), C: mockprovider.New(mockprovider.Options{Name: "c", APIKey: keyC})}
	cs := httptest.NewServer(r.C)
	r.cURL = cs.URL
	t.Cleanup(func() { r.C.Close(); cs.Close() })
	// team-a's own channel is down for gpt-4o: every request has to look beyond it.
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503, Message: "team-a provider outage"})
	return r
}

// load serves the manifests as `switchyard proxy --config` does: they must compile.
func (r *teamRig) load(c teams) {
	r.t.Helper()
	writeFile(r.t, r.dir, c.render(r.aURL, r.bURL, r.cURL))
	if err := r.src.Load(r.srv); err != nil {
		r.t.Fatalf("config does not load: %v", err)
	}
}

// publish serves what the controller publishes when the objects change from last to now: the
// objects that compile as they are now, and those with a problem in their last good form
// (routing.Isolate). It returns the problems of now.
func (r *teamRig) publish(last, now teams) []routing.Problem {
	r.t.Helper()
	compile := func(c teams) (*routing.Table, []routing.Problem) {
		in, err := routing.ParseManifests([]routing.ManifestFile{{Path: "teams.yaml", Data: []byte(c.render(r.aURL, r.bURL, r.cURL))}})
		if err != nil {
			r.t.Fatal(err)
		}
		return routing.Compile(in)
	}
	lastTable, problems := compile(last)
	if len(problems) > 0 {
		r.t.Fatalf("the last good objects have problems: %v", problems)
	}
	table, problems := compile(now)
	out, _, extra := routing.Isolate(table, problems, lastTable)
	r.srv.Apply(out, "teams.yaml")
	return append(problems, extra...)
}

func (r *teamRig) requests() (a, b, c int) { return r.A.Total(), r.B.Total(), r.C.Total() }

// TestFallbackIntoAnotherNamespaceNeedsItsConsent: team-a's policy falls back to team-b's model.
// Without team-b's consent (withdrawn, or given to another team) the fallback is never attempted,
// though team-a's policy, fallbackModels and all, is published as it is (the controller publishes
// both policies as they are now); with acceptFallbackFrom listing team-a, or "*", it answers.
func TestFallbackIntoAnotherNamespaceNeedsItsConsent(t *testing.T) {
	for _, tt := range []struct {
		name, accept string
	}{
		{"acceptFallbackFrom withdrawn", ""},
		{"acceptFallbackFrom lists another team", "acceptFallbackFrom: [team-c]"},
	} {
		t.Run("refused/"+tt.name, func(t *testing.T) {
			r := newTeamRig(t)
			problems := r.publish(teams{mini: "acceptFallbackFrom: [team-a]"}, teams{mini: tt.accept})
			if len(problems) != 1 || problems[0].Reason != routing.ReasonFallbackNotAccepted || problems[0].Name != "chat" {
				t.Fatalf("problems %v, want FallbackNotAccepted on team-a/chat (published as compiled; the proxy skips the hop)", problems)
			}
			got := r.post("/v1/chat/completions", chat("gpt-4o", false))
			if got.status != 503 || !strings.Contains(got.body, "no_channel_available") || !strings.Contains(got.body, "team-a/chan-a") || !strings.Contains(got.body, "team-a provider outage") {
				t.Errorf("got %d %s; want the 503 of team-a's own channel", got.status, got.body)
			}
			if a, b, c := r.requests(); a == 0 || b != 0 || c != 0 {
				t.Errorf("requests A=%d B=%d C=%d: want team-a's channel tried and no other team's", a, b, c)
			}
		})
	}
	for _, accept := range []string{"[team-a]", `["*"]`, "[team-x, team-a]"} {
		t.Run("accepted/"+accept, func(t *testing.T) {
			r := newTeamRig(t)
			r.load(teams{mini: "acceptFallbackFrom: " + accept})
			got := r.post("/v1/chat/completions", chat("gpt-4o", false))
			if got.status != 200 || got.header.Get("X-Switchyard-Model") != "gpt-4o-mini" || got.header.Get("X-Switchyard-Channel") != "team-b/chan-b" {
				t.Fatalf("got %d model=%q channel=%q: %s", got.status, got.header.Get("X-Switchyard-Model"), got.header.Get("X-Switchyard-Channel"), got.body)
			}
			if r.B.Requests("gpt-4o-mini") != 1 {
				t.Errorf("B saw %v", r.B.Counts())
			}
		})
	}
}

// TestFallbackConsentIsTheFirstTeamsOnEveryHop: team-b accepts team-a and sends its own context
// overflow to team-c, which accepts only team-b. team-a's traffic that reached team-b's model
// still belongs to team-a: the hop to team-c is refused (the client gets team-b's
// context_length_exceeded, as if team-b named no overflow model), until team-c accepts team-a.
// Compile finds nothing wrong with either policy: only the proxy can refuse this hop.
func TestFallbackConsentIsTheFirstTeamsOnEveryHop(t *testing.T) {
	cfg := teams{mini: "acceptFallbackFrom: [team-a]\ncontextOverflowModels: [gpt-4.1]", big: "acceptFallbackFrom: [team-b]"}
	r := newTeamRig(t)
	r.B.SetBehavior("gpt-4o-mini", mockprovider.Behavior{Mode: mockprovider.ModeContextLength})
	r.load(cfg)
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 400 || !strings.Contains(got.body, "context_length_exceeded") || got.header.Get("X-Switchyard-Channel") != "team-b/chan-b" {
		t.Errorf("got %d channel=%q %s; want team-b's context_length_exceeded passed through", got.status, got.header.Get("X-Switchyard-Channel"), got.body)
	}
	if r.C.Total() != 0 {
		t.Errorf("team-c's channel saw %v: it accepts team-b, not team-a's traffic passing through team-b", r.C.Counts())
	}

	cfg.big = "acceptFallbackFrom: [team-b, team-a]"
	r.load(cfg)
	got = r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 200 || got.header.Get("X-Switchyard-Model") != "gpt-4.1" || got.header.Get("X-Switchyard-Channel") != "team-c/chan-c" {
		t.Errorf("with team-c's consent: got %d model=%q channel=%q %s", got.status, got.header.Get("X-Switchyard-Model"), got.header.Get("X-Switchyard-Channel"), got.body)
	}
}

// TestFallbackStaysWithinTheFirstPolicysResidency: team-a requires residency kz. Its fallback
// model's policy has no residency rule, and lists a us channel first: that channel is never
// attempted, the fallback model's kz channel is; with no kz channel the request fails on
// team-a's own channel.
func TestFallbackStaysWithinTheFirstPolicysResidency(t *testing.T) {
	r := newTeamRig(t)
	r.load(teams{chanA: "residency: kz", chanB: "residency: us", chat: "requireResidency: [kz]",
		mini: "acceptFallbackFrom: [team-a]", miniChannelsList: "[{name: chan-b}, {name: chan-kz}]"})
	for i := 0; i < 5; i++ {
		got := r.post("/v1/chat/completions", chat("gpt-4o", false))
		if got.status != 200 || got.header.Get("X-Switchyard-Channel") != "team-b/chan-kz" {
			t.Fatalf("request %d: got %d channel=%q %s; want the fallback model's kz channel", i, got.status, got.header.Get("X-Switchyard-Channel"), got.body)
		}
	}
	if r.B.Total() != 0 {
		t.Errorf("the us channel saw %v", r.B.Counts())
	}
	// Without team-b's policy requiring anything, its us channel still serves its own traffic.
	if got := r.post("/v1/chat/completions", chat("gpt-4o-mini", false)); got.header.Get("X-Switchyard-Channel") != "team-b/chan-b" {
		t.Errorf("team-b's own request went to %q", got.header.Get("X-Switchyard-Channel"))
	}

	r2 := newTeamRig(t)
	r2.load(teams{chanA: "residency: kz", chanB: "residency: us", chat: "requireResidency: [kz]", mini: "acceptFallbackFrom: [team-a]"})
	for i := 0; i < 5; i++ {
		if got := r2.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 503 || !strings.Contains(got.body, "team-a/chan-a") {
			t.Fatalf("request %d: got %d %s; want the 503 of team-a's own channel", i, got.status, got.body)
		}
	}
	if a, b, c := r2.requests(); a == 0 || b != 0 || c != 0 {
		t.Errorf("requests A=%d B=%d C=%d: want only team-a's kz channel", a, b, c)
	}
}

// TestLastGoodPolicyNeverUsesAChannelThatLeftItsResidency: team-a's only channel is ejected, then
// changes its residency to us. team-a's policy (requireResidency kz) then has a problem and keeps
// its last good form, which lists that channel: the proxy never sends to it again, not even by
// panic routing (every channel of the model is out, and panic routing is on by default).
func TestLastGoodPolicyNeverUsesAChannelThatLeftItsResidency(t *testing.T) {
	r := newTeamRig(t)
	kz := teams{chanA: "residency: kz", chat: "requireResidency: [kz]", chatFallback: "[]"}
	if problems := r.publish(kz, kz); len(problems) > 0 {
		t.Fatal(problems)
	}
	for i := 0; i < 3; i++ { // two attempts each (the only channel, then the same again)
		r.post("/v1/chat/completions", chat("gpt-4o", false))
	}
	if p := r.phase("team-a/chan-a", "gpt-4o"); p != "Ejected" {
		t.Fatalf("team-a/chan-a is %s, want Ejected", p)
	}
	r.A.ClearBehavior("gpt-4o")
	before := r.A.Total()
	// Panic routing does send to an ejected channel that may serve: the control for what follows.
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 || r.A.Total() != before+1 {
		t.Fatalf("panic routing to the ejected kz channel: got %d, A saw %d more", got.status, r.A.Total()-before)
	}

	problems := r.publish(kz, teams{chanA: "residency: us", chat: "requireResidency: [kz]", chatFallback: "[]"})
	if len(problems) != 1 || problems[0].Reason != routing.ReasonModelNotServed {
		t.Fatalf("problems %v, want ModelNotServed on team-a/chat", problems)
	}
	before = r.A.Total()
	for i := 0; i < 3; i++ {
		if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 503 {
			t.Fatalf("got %d %s; want 503, no resident channel", got.status, got.body)
		}
	}
	if r.A.Total() != before {
		t.Errorf("the channel that left residency kz saw %d more requests", r.A.Total()-before)
	}
}

// TestFallbackHopChecksDoNotAllocate: the consent and residency checks run on every hop of every
// request; like the rest of channel selection they must not allocate (BenchmarkHotPath covers
// the requested model only, not a hop). The walk: chan-a fails twice (the same-channel retry of
// the only channel), then the plan hops to team-b/mini.
func TestFallbackHopChecksDoNotAllocate(t *testing.T) {
	cfg := teams{chanA: "residency: kz", chanB: "residency: us", chat: "requireResidency: [kz]",
		mini: "acceptFallbackFrom: [team-x, team-a]", miniChannelsList: "[{name: chan-b}, {name: chan-kz}]"}
	in, err := routing.ParseManifests([]routing.ManifestFile{{Path: "teams.yaml", Data: []byte(cfg.render("http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"))}})
	if err != nil {
		t.Fatal(err)
	}
	tbl, problems := routing.Compile(in)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: &fakeClock{t: now}})
	s.Apply(tbl, "teams.yaml")
	c := s.cfg.Load()
	var p failover.Plan
	hop := func() {
		now = now.Add(time.Second) // within the retry budget's floor
		p.Start(c, s.engine, failover.GlobalRand{}, now, "gpt-4o")
		for range 8 {
			st := p.Next(now)
			if st.Action == failover.ActionWait {
				continue
			}
			if st.Action != failover.ActionTry {
				t.Fatalf("step %v %+v, want a try", st.Action, st)
			}
			if st.Model.Name == "gpt-4o-mini" {
				if st.Channel.ID() != "team-b/chan-kz" {
					t.Fatalf("picked %s, want team-b/chan-kz (team-b/chan-b is us)", st.Channel.ID())
				}
				return
			}
			p.Observe(failover.Result{Outcome: health.OutcomeServerError})
		}
		t.Fatal("the plan never hopped to gpt-4o-mini")
	}
	hop() // sizes the plan's and the engine's scratch slices
	if n := testing.AllocsPerRun(100, hop); n != 0 {
		t.Errorf("a fallback hop allocates %v times", n)
	}
}
