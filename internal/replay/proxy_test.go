package replay_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/replay"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// These tests run the proxy over real HTTP against mock providers on a test clock, then replay
// its access log with the same manifests and the same random draws, and compare: the proxy is
// the reference replay must follow. Unlike internal/failover's differential test they run long
// enough (minutes of log time, one request a second) for cooldowns, probes and ramps.

var proxyT0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// drawsByID gives each request its own seeded stream, by request id, in the proxy and in replay.
func drawsByID(id string) failover.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return rand.New(rand.NewPCG(7, h.Sum64()))
}

// world is two mock providers, a and b, serving gpt-4o; the policy comes from the test.
type world struct {
	t       *testing.T
	a, b    *mockprovider.Server
	man     string
	clock   *testutil.Clock
	srv     *proxy.Server
	api     *httptest.Server
	log     testutil.SyncBuffer
	done    chan struct{}
	servers []*httptest.Server
}

func channelsYAML(urls map[string]string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Secret\nmetadata: {name: keys}\nstringData: {k: sk-replay-proxy}\n")
	for _, name := range []string{"a", "b"} {
		fmt.Fprintf(&b, `---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: %s}
spec:
  provider: openai
  baseURL: %s/v1
  credentialsRef: {name: keys, key: k}
  models: [{name: gpt-4o}]
  failureDomain: {region: %s}
  timeouts: {request: 3s, fallbackRequest: 2s, firstByte: 200ms, streamIdle: 300ms}
`, name, urls[name], name)
	}
	return b.String()
}

func newWorld(t *testing.T, policy string) *world {
	t.Helper()
	return newWorldOf(t, policy, nil)
}

// newWorldOf is newWorld with the channel manifests passed through edit (nil: unchanged).
func newWorldOf(t *testing.T, policy string, edit func(channels string) string) *world {
	t.Helper()
	w := &world{t: t, clock: testutil.NewClock(proxyT0), done: make(chan struct{}, 1)}
	urls := map[string]string{}
	for _, name := range []string{"a", "b"} {
		m := mockprovider.New(mockprovider.Options{Name: name, APIKey: "sk-replay-proxy"})
		srv := httptest.NewServer(m)
		w.servers = append(w.servers, srv)
		urls[name] = srv.URL
		if name == "a" {
			w.a = m
		} else {
			w.b = m
		}
	}
	channels := channelsYAML(urls)
	if edit != nil {
		channels = edit(channels)
	}
	w.man = channels + "---\n" + policy
	in, err := routing.ParseManifests([]routing.ManifestFile{{Path: "world.yaml", Data: []byte(w.man)}})
	if err != nil {
		t.Fatal(err)
	}
	tbl, problems := routing.Compile(in)
	if len(problems) > 0 {
		t.Fatalf("manifests: %v", problems)
	}
	w.srv = proxy.New(proxy.Options{Clock: w.clock, Rand: drawsByID, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		AccessLog: &w.log, Replica: "replay-proxy", RequestIDHeader: "X-Request-Id"})
	w.srv.Apply(tbl, "world.yaml")
	// The client may have the whole answer before the proxy has logged and observed its last
	// attempt: the clock must not move before the handler is done.
	h := w.srv.Handler()
	w.api = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		defer func() { w.done <- struct{}{} }()
		h.ServeHTTP(rw, r)
	}))
	w.servers = append(w.servers, w.api)
	t.Cleanup(func() {
		w.a.Close()
		w.b.Close()
		for _, s := range w.servers {
			s.Close()
		}
	})
	return w
}

// at moves the clock to t and runs the proxy's background round (Tick, probes), as its loop
// does once a second, waiting for the probes it started.
func (w *world) at(t time.Time) {
	w.clock.Set(t)
	w.srv.Step(context.Background())
	w.srv.WaitProbes()
}

// request sends one streamed chat request for gpt-4o; cohort, when set, is its
// X-Switchyard-Cohort header.
func (w *world) request(id, cohort string) int {
	w.t.Helper()
	body := fmt.Sprintf(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"%s"}]}`, id)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.api.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	if cohort != "" {
		req.Header.Set(proxy.CohortHeader, cohort)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		w.t.Fatal("the proxy's handler did not return")
	}
	return resp.StatusCode
}

// journal is the proxy's journal up to end, one line per event, sorted.
func (w *world) journal(end time.Time) []string {
	w.srv.Engine().Tick(end)
	var out []string
	for _, ev := range w.srv.Engine().Events(0) {
		if !ev.At.After(end) {
			out = append(out, eventLine(ev.Channel, ev.Model, ev.At.UTC().Format(time.RFC3339Nano), ev.From.String(), ev.To.String(), ev.Reason))
		}
	}
	sort.Strings(out)
	return out
}

func eventLine(channel, model, at, from, to, reason string) string {
	return fmt.Sprintf("%s %s×%s %s->%s %s", at, channel, model, from, to, reason)
}

// logLine is what the tests read back from the proxy's access log.
type logLine struct {
	TS        time.Time `json:"ts"`
	RequestID string    `json:"requestId"`
	Channel   string    `json:"channel"`
	Attempt   int       `json:"attempt"`
	Outcome   string    `json:"outcome"`
	Probe     bool      `json:"probe"`
}

func readLog(t *testing.T, b []byte) []logLine {
	t.Helper()
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// withoutProbes drops the proxy's own probes from a log: what a log written without them (a
// synthetic log, another gateway's) looks like.
func withoutProbes(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(`"probe":true`)) {
			out.Write(sc.Bytes())
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

type replayed struct {
	rep      *replay.Report
	attempts []string // "request #n channel", in trace order
	journal  []string // sorted, up to end
}

func replayLog(t *testing.T, man string, log []byte, end time.Time) replayed {
	t.Helper()
	in, err := routing.ParseManifests([]routing.ManifestFile{{Path: "world.yaml", Data: []byte(man)}})
	if err != nil {
		t.Fatal(err)
	}
	setup, err := replay.NewSetup(in.Policies, in.Channels)
	if err != nil {
		t.Fatal(err)
	}
	var out replayed
	out.rep, err = replay.Run(context.Background(), setup, bytes.NewReader(log), replay.Options{Rand: drawsByID,
		Trace: func(a replay.TracedAttempt) {
			out.attempts = append(out.attempts, fmt.Sprintf("%s #%d %s", a.RequestID, a.Number, a.Channel))
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range out.rep.Channels {
		for _, e := range c.Events {
			if at, err := time.Parse(time.RFC3339Nano, e.At); err == nil && !at.After(end) {
				out.journal = append(out.journal, eventLine(c.Channel, c.Model, e.At, e.From, e.To, e.Reason))
			}
		}
	}
	sort.Strings(out.journal)
	return out
}

func only(lines []string, channel string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, " "+channel+"×") {
			out = append(out, l)
		}
	}
	return out
}

func diffLines(a, b []string) string {
	return fmt.Sprintf("proxy:\n  %s\nreplay:\n  %s", strings.Join(a, "\n  "), strings.Join(b, "\n  "))
}

const panicPolicy = `apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: a}, {name: b}]
  strategy: Priority
  scenario: chat
`

// TestPanicRoutedChannelRecoversAsInTheProxy: both channels of gpt-4o fail for 15 s and are
// ejected; panic routing then sends every request to a, which answers again, while b stays
// down. The proxy's probes (handed out by the engine once a's cooldown is over) pass, a ramps
// and is Healthy again; b's probes fail. Replay of the proxy's log must journal the same, and
// so must replay of the same log without the probe lines (a log that does not carry the
// proxy's probes): there the panic-routed requests on a, one a second, are the evidence that
// answers the replayed probes.
func TestPanicRoutedChannelRecoversAsInTheProxy(t *testing.T) {
	w := newWorld(t, panicPolicy)
	const seconds = 20 * 60
	fail := mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503}
	for s := range seconds {
		switch s {
		case 60:
			w.a.SetDefault(fail)
			w.b.SetDefault(fail)
		case 75:
			w.a.SetDefault(mockprovider.Behavior{})
		}
		w.at(proxyT0.Add(time.Duration(s) * time.Second))
		w.request(fmt.Sprintf("r-%d", s), "")
	}
	end := proxyT0.Add((seconds - 1) * time.Second)
	full := w.log.Bytes()
	proxyJournal := w.journal(end)

	// The world did what the test says: a was panic-routed, probed back and ramped.
	var reasons []string
	for _, l := range only(proxyJournal, "a") {
		reasons = append(reasons, l[strings.LastIndex(l, " ")+1:])
	}
	if want := "ConsecutiveFailures CooldownElapsed ProbesPassed RampStep RampStep RampStep RampCompleted"; strings.Join(reasons, " ") != want {
		t.Fatalf("the proxy's journal of a is %v, want %s:\n%s", reasons, want, strings.Join(proxyJournal, "\n"))
	}
	probes := 0
	for _, l := range readLog(t, full) {
		if l.Probe {
			probes++
		}
	}
	if probes == 0 {
		t.Fatal("the proxy logged no probes")
	}

	got := replayLog(t, w.man, full, end)
	if strings.Join(got.journal, "\n") != strings.Join(proxyJournal, "\n") {
		t.Errorf("replay of the proxy's log journals differently:\n%s", diffLines(proxyJournal, got.journal))
	}

	// Without the probe lines, a's journal is still the proxy's. b has no line at all after the
	// panic began (a answered every request): replay cannot know what b's probes would have
	// got, so b stays Probing, and the report says its probes went unanswered.
	bare := replayLog(t, w.man, withoutProbes(t, full), end)
	if a, b := only(proxyJournal, "a"), only(bare.journal, "a"); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("replay of the log without probes journals a differently:\n%s", diffLines(a, b))
	}
	for _, c := range bare.rep.Channels {
		if c.Channel == "b" && (c.Probes.Answered != 0 || c.Probes.Unanswered == 0) {
			t.Errorf("b's probes without evidence: %+v", c.Probes)
		}
		if c.Channel == "a" && c.Probes.Answered != 3 {
			t.Errorf("a's probes: %+v, want 3 answered by the panic-routed requests", c.Probes)
		}
	}
}

const halfPolicy = `apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: a}, {name: b}]
  strategy: Priority
  scenario: chat
  rollout: {mode: Enforce, percent: 50}
`

// proxyAttempts lists the client attempts of an access log as "request #n channel", in log
// order (the order the proxy made them: one request at a time).
func proxyAttempts(lines []logLine) []string {
	var out []string
	for _, l := range lines {
		if !l.Probe {
			out = append(out, fmt.Sprintf("%s #%d %s", l.RequestID, l.Attempt, l.Channel))
		}
	}
	return out
}

// TestReplaySplitsCohortsAsTheProxy: a policy rolled out to 50% of the requests. a fails from
// 10:01 to 10:04 and is ejected; from then on the policy's cohort goes straight to b while the
// listed cohort still tries a first and fails over to b; a recovers, is probed and ramps, and
// the listed cohort keeps sending it everything during the ramp, so that when a fails again for
// three seconds at 10:06:40 the listed requests' failures are a rise during the ramp (the
// policy's cohort sends a only its 5% share). Every third request carries an
// X-Switchyard-Cohort header, one session per ten seconds, which decides its cohort instead of
// its id. Replay of the proxy's log must make the same attempts for every request and journal
// the same transitions.
func TestReplaySplitsCohortsAsTheProxy(t *testing.T) {
	w := newWorld(t, halfPolicy)
	const seconds = 12 * 60
	for s := range seconds {
		switch s {
		case 60:
			w.a.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
		case 240, 403:
			w.a.SetDefault(mockprovider.Behavior{})
		case 400:
			w.a.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
		}
		w.at(proxyT0.Add(time.Duration(s) * time.Second))
		cohort := ""
		if s%3 == 0 {
			cohort = fmt.Sprintf("session-%d", s/10)
		}
		w.request(fmt.Sprintf("r-%d", s), cohort)
	}
	end := proxyT0.Add((seconds - 1) * time.Second)
	full := w.log.Bytes()
	lines := readLog(t, full)
	want := proxyAttempts(lines)
	if !bytes.Contains(full, []byte(`"cohortKey":"session-0"`)) {
		t.Fatal("the access log does not carry the X-Switchyard-Cohort header")
	}

	// The world did what the test says: after a's ejection both cohorts are there, one request
	// in two or so each: the listed one fails over from a, the policy's goes to b at once.
	journal := w.journal(end)
	var ejectedAt time.Time
	for _, l := range only(journal, "a") {
		if strings.HasSuffix(l, "ConsecutiveFailures") {
			ejectedAt, _ = time.Parse(time.RFC3339Nano, l[:strings.Index(l, " ")])
		}
	}
	if ejectedAt.IsZero() || !strings.Contains(strings.Join(only(journal, "a"), "\n"), "RampingUp->Ejected RampErrorRise") {
		t.Fatalf("a was not ejected, probed back and ejected again during the ramp:\n%s", strings.Join(journal, "\n"))
	}
	perRequest := map[string][]string{}
	var order []string
	for _, l := range lines {
		if l.Probe {
			continue
		}
		if perRequest[l.RequestID] == nil {
			order = append(order, l.RequestID)
		}
		perRequest[l.RequestID] = append(perRequest[l.RequestID], l.Channel)
		if l.TS.Before(ejectedAt.Add(time.Second)) || l.TS.After(proxyT0.Add(240*time.Second)) {
			delete(perRequest, l.RequestID) // only the outage after the ejection tells the cohorts apart
		}
	}
	listed, policy := 0, 0
	for _, id := range order {
		switch strings.Join(perRequest[id], " ") {
		case "a b":
			listed++
		case "b":
			policy++
		}
	}
	if listed < 40 || policy < 40 {
		t.Fatalf("during the outage %d requests went a then b (listed) and %d straight to b (policy)", listed, policy)
	}

	got := replayLog(t, w.man, full, end)
	if d := firstDifference(want, got.attempts); d != "" {
		t.Errorf("replay's attempts differ from the proxy's: %s", d)
	}
	if strings.Join(got.journal, "\n") != strings.Join(journal, "\n") {
		t.Errorf("replay journals differently:\n%s", diffLines(journal, got.journal))
	}
	m := got.rep.Models[0]
	if m.Rollout != "Enforce 50%" || m.Requests.Listed < seconds*4/10 || m.Requests.Listed > seconds*6/10 || m.Requests.FailedListed != 0 {
		t.Errorf("the report's rollout %q, requests %+v", m.Rollout, m.Requests)
	}
}

func firstDifference(a, b []string) string {
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return fmt.Sprintf("attempt %d: proxy %q, replay %q (proxy made %d attempts, replay %d)", i+1, x, y, len(a), len(b))
		}
	}
	return ""
}

const dryRunPolicy = `apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: a}, {name: b}]
  strategy: Priority
  scenario: chat
  rollout: {mode: DryRun}
`

// TestDisabledAndDryRunAsInTheProxy: replay builds its routes and health targets with the
// proxy's function (failover.BuildRoutes), so an operator-disabled channel and a DryRun policy
// are judged alike. a answers 503 throughout. Disabled, it takes no request in the proxy and none
// in the replay, and both journal it Disabled by the operator. Under a DryRun policy every request
// tries a first and fails over to b; the shadow journals would-be ejections, which replay
// journals too, while a itself stays Healthy and the report counts no ejection.
func TestDisabledAndDryRunAsInTheProxy(t *testing.T) {
	const seconds = 90
	for _, tc := range []struct {
		name, policy string
		edit         func(string) string
	}{
		{"disabled", panicPolicy, func(ch string) string {
			return strings.Replace(ch, "metadata: {name: a}\nspec:\n", "metadata: {name: a}\nspec:\n  disabled: true\n  disabledReason: maintenance\n", 1)
		}},
		{"dry-run", dryRunPolicy, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorldOf(t, tc.policy, tc.edit)
			w.a.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
			for s := range seconds {
				w.at(proxyT0.Add(time.Duration(s) * time.Second))
				w.request(fmt.Sprintf("r-%d", s), "")
			}
			end := proxyT0.Add((seconds - 1) * time.Second)
			full := w.log.Bytes()
			want := proxyAttempts(readLog(t, full))
			journal := w.journal(end)
			ja := strings.Join(only(journal, "a"), "\n")
			switch tc.name {
			case "disabled":
				if strings.Contains(strings.Join(want, " "), " a") || !strings.Contains(ja, "Disabled") {
					t.Fatalf("the proxy sent a requests or did not journal it Disabled:\n%s\n%s", strings.Join(want, "\n"), ja)
				}
			case "dry-run":
				if !strings.Contains(ja, "->Ejected DryRun") {
					t.Fatalf("the proxy's shadow of a did not eject:\n%s", ja)
				}
			}

			got := replayLog(t, w.man, full, end)
			if d := firstDifference(want, got.attempts); d != "" {
				t.Errorf("replay's attempts differ from the proxy's: %s", d)
			}
			if strings.Join(got.journal, "\n") != strings.Join(journal, "\n") {
				t.Errorf("replay journals differently:\n%s", diffLines(journal, got.journal))
			}
			for _, c := range got.rep.Channels {
				if c.Channel != "a" {
					continue
				}
				wantPhase := "Disabled"
				if tc.name == "dry-run" {
					wantPhase = "Healthy"
				}
				if c.Ejections != 0 || len(c.Phases) == 0 || c.Phases[0].Phase != wantPhase || c.Phases[0].TimePercent < 99 {
					t.Errorf("a in the report: %d ejections, phases %+v; want none and %s throughout", c.Ejections, c.Phases, wantPhase)
				}
			}
		})
	}
}
