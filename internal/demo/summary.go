package demo

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// marks are the moments the demo acted, on its own clock (the proxy's journal is on the same
// machine's wall clock).
type marks struct {
	Start       time.Time
	End         time.Time
	Channel     string               // the channel the incident hit
	Models      []string             // the models it served, in order
	FailMode    map[string]string    // model -> what the mock did ("HTTP 503", "hangs")
	FailAt      map[string]time.Time // model -> when the demo told the mock to fail
	RecoverAt   map[string]time.Time // model -> when the demo told the mock to recover
	Interrupted bool
	CapReached  bool
}

// keyStory is what happened to one channel×model the incident hit, from the journal.
type keyStory struct {
	Model, Mode string

	Ejected    bool
	ToEjection time.Duration // first ejection after the failure began, minus the failure
	Rule       string        // the rule that fired (journal reason)
	Message    string        // its observed figures

	Ejections     int // rule ejections (incl. ramp relapses) during the run
	ProbeFailures int
	// Quiet: client attempts on the key stopped growing (switchyard_upstream_attempts_total,
	// polled once a second) before the ejection; ToQuiet is the first poll that saw the last
	// attempt, minus the failure. The routing can move traffic off a key before it is ejected.
	Quiet          bool
	ToQuiet        time.Duration
	FailedAttempts float64 // failed client attempts on the key during the run (metrics)

	Recovered  bool          // told to recover
	Ramp       bool          // probes passed after the recovery
	ToRamp     time.Duration // recovery -> ProbesPassed (the ramp's first step)
	Full       bool
	ToFull     time.Duration // recovery -> traffic share 100%
	Healthy    bool
	ToHealthy  time.Duration // recovery -> RampCompleted (Healthy)
	FinalPhase string
}

// labeled is one labelled counter value.
type labeled struct {
	Label string
	Value float64
}

// summary is the demo's result. Every figure comes from the proxy (its journal, admin API and
// metrics) except the generator's own counts, shown beside the proxy's for comparison.
type summary struct {
	Elapsed  time.Duration
	Incident time.Duration // failure -> recovery, as played (0: no incident)
	// IncidentOngoing: the demo ended before the recovery; Incident runs to the end.
	IncidentOngoing bool
	Channel         string

	ProxyTotal, ProxySuccess float64
	ProxyOutcomes            []labeled // switchyard_requests_total by outcome
	Gen                      clientStats
	LatP50, LatP95, LatMax   time.Duration // client latency (generator)

	Failovers   float64
	FailoversBy []labeled // from -> to (reason)
	// Ejections by a trip rule, from the journal (channel × model (reason)); ProbeFailed
	// returns to cooldown are not ejections.
	Ejections []labeled
	// switchyard_ejections_total, and the part of it with reason ProbeFailed.
	EjectionsMetric, EjectionsMetricProbe float64

	Keys     []keyStory
	Rules    []string // the policies' ejection and recovery rules
	Notes    []string // odd but not fatal
	Problems []string // the story did not happen: exit non-zero
}

// countPoint is one poll of a counter.
type countPoint struct {
	At    time.Time
	Value float64
}

// summarize computes the summary. It is pure: the inputs are what the demo collected, attempts
// being the failing channel's client attempts per model as polled from /metrics.
func summarize(events []adminapi.Event, mk marks, met Metrics, results []outcome, t *routing.Table, final []adminapi.ChannelState,
	attempts map[string][]countPoint) summary {
	s := summary{Elapsed: mk.End.Sub(mk.Start), Channel: mk.Channel}
	if len(mk.Models) > 0 {
		switch f, r := mk.FailAt[mk.Models[0]], mk.RecoverAt[mk.Models[0]]; {
		case f.IsZero():
		case r.IsZero(): // still failing when the demo ended
			s.Incident, s.IncidentOngoing = mk.End.Sub(f), true
		default:
			s.Incident = r.Sub(f)
		}
	}
	models := map[string]bool{}
	for _, p := range t.Policies {
		for _, m := range p.Models {
			models[m] = true
		}
	}
	for k, v := range met.SumBy("switchyard_requests_total", nil, "model", "outcome") {
		model, outcome, _ := strings.Cut(k, "|")
		if !models[model] {
			continue
		}
		s.ProxyTotal += v
		if outcome == "success" {
			s.ProxySuccess += v
		}
		s.ProxyOutcomes = addLabeled(s.ProxyOutcomes, outcome, v)
	}
	sortLabeled(s.ProxyOutcomes)
	var modelNames []string
	for m := range models {
		modelNames = append(modelNames, m)
	}
	sort.Strings(modelNames)
	counts := countClients(results, modelNames)
	s.Gen = counts[len(counts)-1]
	q := latencyQuantiles(results, 0.5, 0.95, 1)
	s.LatP50, s.LatP95, s.LatMax = q[0], q[1], q[2]

	s.Failovers = met.Sum("switchyard_failovers_total", nil)
	for k, v := range met.SumBy("switchyard_failovers_total", nil, "from_channel", "to_channel", "reason") {
		p := strings.Split(k, "|")
		s.FailoversBy = append(s.FailoversBy, labeled{fmt.Sprintf("%s → %s (%s)", p[0], p[1], p[2]), v})
	}
	sortLabeled(s.FailoversBy)
	for _, ev := range events {
		if newEjection(ev) {
			s.Ejections = addLabeled(s.Ejections, fmt.Sprintf("%s × %s (%s)", ev.Channel, ev.Model, ev.Reason), 1)
		}
	}
	sortLabeled(s.Ejections)
	s.EjectionsMetric = met.Sum("switchyard_ejections_total", nil)
	s.EjectionsMetricProbe = met.Sum("switchyard_ejections_total", map[string]string{"reason": health.ReasonProbeFailed})

	phase := map[string]string{}
	for _, c := range final {
		phase[c.Channel+"|"+c.Model] = c.Phase
	}
	for _, model := range mk.Models {
		pol := policyOf(t, model)
		steps := 1
		if pol != nil {
			steps = len(pol.Settings.RampSteps)
		}
		ks := storyOf(events, mk.Channel, model, mk.FailAt[model], mk.RecoverAt[model], steps)
		ks.Mode = mk.FailMode[model]
		if ks.Ejected {
			ks.Quiet, ks.ToQuiet = quietBefore(attempts[model], mk.FailAt[model], mk.FailAt[model].Add(ks.ToEjection))
		}
		for k, v := range met.SumBy("switchyard_upstream_attempts_total", map[string]string{"channel": mk.Channel, "model": model}, "outcome") {
			if isFailure(k) {
				ks.FailedAttempts += v
			}
		}
		ks.FinalPhase = phase[mk.Channel+"|"+model]
		if ks.Healthy && ks.FinalPhase != string(health.PhaseHealthy.String()) {
			ks.Healthy = false
		}
		s.Keys = append(s.Keys, ks)
		key := mk.Channel + " × " + model
		switch {
		case mk.FailAt[model].IsZero():
			s.Problems = append(s.Problems, key+": the incident never started")
		case !ks.Ejected:
			s.Problems = append(s.Problems, key+" was never ejected during the incident")
		case mk.RecoverAt[model].IsZero():
			s.Problems = append(s.Problems, key+": the recovery never started")
		case !ks.Healthy:
			s.Problems = append(s.Problems, fmt.Sprintf("%s did not come back to Healthy at full traffic within the cap (phase %s)", key, orDash(ks.FinalPhase)))
		}
	}
	for _, p := range t.Policies {
		s.Rules = append(s.Rules, describeRules(p))
	}

	if s.Gen.Errors > 0 {
		// The story is that clients do not notice the outage: a request that failed is a
		// problem (writeFailedRequests lists each with its attempts from the access log).
		s.Problems = append(s.Problems, fmt.Sprintf("%d client requests failed (%s)", s.Gen.Errors, s.Gen.kinds()))
	}
	if mk.Interrupted {
		s.Problems = append([]string{"interrupted before the end"}, s.Problems...)
	}
	// Notes: things a careful reader should know, that do not make the story false.
	if s.ProxyTotal != float64(s.Gen.Sent) || s.ProxySuccess != float64(s.Gen.OK) {
		s.Notes = append(s.Notes, fmt.Sprintf("the proxy counted %.0f requests (%.0f successful), the generator %d (%d successful)",
			s.ProxyTotal, s.ProxySuccess, s.Gen.Sent, s.Gen.OK))
	}
	if float64(s.Gen.FailedOver) != s.Failovers {
		s.Notes = append(s.Notes, fmt.Sprintf("the generator saw %d answers with X-Switchyard-Attempts > 1; switchyard_failovers_total is %.0f (it counts moves between channels, not retries on the same one)",
			s.Gen.FailedOver, s.Failovers))
	}
	for _, ev := range events {
		if ev.To == health.PhaseEjected.String() && (ev.Channel != mk.Channel || !slices.Contains(mk.Models, ev.Model)) {
			s.Notes = append(s.Notes, fmt.Sprintf("%s × %s was ejected too, at +%s: %s: %s", ev.Channel, ev.Model,
				secs(ev.Time.Sub(mk.Start)), ev.Reason, ev.Message))
		}
		if ev.To == health.PhaseEjected.String() && ev.Channel == mk.Channel && !mk.FailAt[ev.Model].IsZero() && ev.Time.Before(mk.FailAt[ev.Model]) {
			s.Notes = append(s.Notes, fmt.Sprintf("%s × %s was ejected before the incident, at +%s: %s: %s", ev.Channel, ev.Model,
				secs(ev.Time.Sub(mk.Start)), ev.Reason, ev.Message))
		}
	}
	return s
}

// storyOf reads one key's journal: the first ejection after failAt, then, after recoverAt, the
// first RampCompleted and the ProbesPassed and last RampStep that led to it.
func storyOf(events []adminapi.Event, channel, model string, failAt, recoverAt time.Time, steps int) keyStory {
	ks := keyStory{Model: model, Recovered: !recoverAt.IsZero()}
	if failAt.IsZero() {
		return ks
	}
	var rampAt, fullAt time.Time
	rampSteps := 0
	for _, ev := range events {
		if ev.Channel != channel || ev.Model != model || ev.Time.Before(failAt) {
			continue
		}
		switch {
		case ev.Reason == health.ReasonProbeFailed:
			ks.ProbeFailures++
		case newEjection(ev):
			ks.Ejections++
			if !ks.Ejected {
				ks.Ejected, ks.ToEjection, ks.Rule, ks.Message = true, ev.Time.Sub(failAt), ev.Reason, ev.Message
			}
		}
		if !ks.Recovered || ev.Time.Before(recoverAt) || ks.Healthy {
			continue
		}
		switch ev.Reason {
		case health.ReasonProbesPassed:
			rampAt, fullAt, rampSteps = ev.Time, time.Time{}, 0
			if steps <= 1 {
				fullAt = ev.Time
			}
		case health.ReasonRampStep:
			rampSteps++
			if !rampAt.IsZero() && rampSteps == steps-1 {
				fullAt = ev.Time
			}
		case health.ReasonRampErrorRise, health.ReasonRampLatencyRise:
			rampAt, fullAt, rampSteps = time.Time{}, time.Time{}, 0
		case health.ReasonRampCompleted:
			ks.Healthy, ks.ToHealthy = true, ev.Time.Sub(recoverAt)
			if !rampAt.IsZero() {
				ks.Ramp, ks.ToRamp = true, rampAt.Sub(recoverAt)
			}
			if !fullAt.IsZero() {
				ks.Full, ks.ToFull = true, fullAt.Sub(recoverAt)
			}
		}
	}
	if !ks.Healthy && !rampAt.IsZero() {
		ks.Ramp, ks.ToRamp = true, rampAt.Sub(recoverAt)
	}
	return ks
}

// quietBefore finds, in a polled counter, the poll that first saw its last increase in
// [from, until]: the time (minus from) by which the key stopped taking client attempts. It says
// nothing (false) when the counter still grew at the last poll before until, or when no poll
// falls in the interval.
func quietBefore(series []countPoint, from, until time.Time) (bool, time.Duration) {
	var last time.Time
	grewAtEnd := false
	for i := 1; i < len(series); i++ {
		p := series[i]
		if p.At.Before(from) || p.At.After(until) {
			continue
		}
		grew := p.Value > series[i-1].Value
		if grew {
			last = p.At
		}
		grewAtEnd = grew
	}
	if last.IsZero() || grewAtEnd {
		return false, 0
	}
	return true, last.Sub(from)
}

func policyOf(t *routing.Table, model string) *routing.Policy {
	for i := range t.Policies {
		if slices.Contains(t.Policies[i].Models, model) {
			return &t.Policies[i]
		}
	}
	return nil
}

// describeRules says, in one line, when a policy ejects and how it brings a channel back.
func describeRules(p routing.Policy) string {
	st := p.Settings
	var trips []string
	if st.ErrorRatePercent > 0 {
		trips = append(trips, fmt.Sprintf("error rate ≥ %d%% with ≥ %d requests in %s", st.ErrorRatePercent, st.MinRequests, st.Window))
	}
	if st.ConsecutiveFailures > 0 {
		trips = append(trips, fmt.Sprintf("%d consecutive failures", st.ConsecutiveFailures))
	}
	if st.TimeoutRatePercent > 0 {
		trips = append(trips, fmt.Sprintf("timeout rate ≥ %d%%", st.TimeoutRatePercent))
	}
	if st.LatencyP95 > 0 {
		trips = append(trips, fmt.Sprintf("p95 > %s", st.LatencyP95))
	}
	if st.EjectBelow > 0 {
		trips = append(trips, fmt.Sprintf("score < %d for %s", st.EjectBelow, st.EjectAfter))
	}
	steps := make([]string, len(st.RampSteps))
	for i, v := range st.RampSteps {
		steps[i] = fmt.Sprint(v)
	}
	return fmt.Sprintf("%s (%s): eject on %s; cooldown %s (doubling up to %s); %d probes %s apart, each within %s; ramp %s%% holding %s per step",
		p.Name, strings.Join(p.Models, ", "), strings.Join(trips, " or "), st.Cooldown, st.MaxCooldown,
		st.ProbeSuccessesRequired, st.ProbeInterval, st.ProbeMaxLatency, strings.Join(steps, "→"), st.RampHold)
}

func addLabeled(ls []labeled, label string, v float64) []labeled {
	for i := range ls {
		if ls[i].Label == label {
			ls[i].Value += v
			return ls
		}
	}
	return append(ls, labeled{label, v})
}

func sortLabeled(ls []labeled) {
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].Value != ls[j].Value {
			return ls[i].Value > ls[j].Value
		}
		return ls[i].Label < ls[j].Label
	})
}

func joinLabeled(ls []labeled) string {
	if len(ls) == 0 {
		return "none"
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s %.0f", l.Label, l.Value)
	}
	return strings.Join(parts, ", ")
}

// secs formats a duration in seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// render writes the summary.
func (s summary) render(w io.Writer) {
	fmt.Fprintf(w, "\n══ Summary ══ from the proxy's own figures (/metrics, /admin/v1/events, /admin/v1/channels); \"generator\" marks the demo client's count\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	incident := fmt.Sprintf("incident on %s for %s", s.Channel, s.Incident.Round(100*time.Millisecond))
	switch {
	case s.Incident == 0:
		incident = "no incident played"
	case s.IncidentOngoing:
		incident += ", not over when the demo ended"
	}
	fmt.Fprintf(tw, "Run\t%s, %s\n", s.Elapsed.Round(100*time.Millisecond), incident)
	fmt.Fprintf(tw, "Client success rate\t%s (%.0f/%.0f, switchyard_requests_total: %s)\n",
		successPct(s.ProxySuccess, s.ProxyTotal), s.ProxySuccess, s.ProxyTotal, joinLabeled(s.ProxyOutcomes))
	agree := "agrees"
	if s.ProxyTotal != float64(s.Gen.Sent) || s.ProxySuccess != float64(s.Gen.OK) {
		agree = "DIFFERS"
	}
	errs := ""
	if s.Gen.Errors > 0 {
		errs = " — " + s.Gen.kinds()
	}
	fmt.Fprintf(tw, "  generator\t%s (%d/%d, %d streamed; %s)%s\n", successPct(float64(s.Gen.OK), float64(s.Gen.Sent)),
		s.Gen.OK, s.Gen.Sent, s.Gen.Streams, agree, errs)
	fmt.Fprintf(tw, "Failovers\t%.0f (switchyard_failovers_total: %s)\n", s.Failovers, joinLabeled(s.FailoversBy))
	fmt.Fprintf(tw, "  generator\t%d answers came with X-Switchyard-Attempts > 1\n", s.Gen.FailedOver)
	fmt.Fprintf(tw, "Client latency\tp50 %s, p95 %s, max %s (generator; a hang costs the firstByte timeout of a stream, the request timeout of a non-streamed answer, before the failover)\n",
		s.LatP50.Round(time.Millisecond), s.LatP95.Round(time.Millisecond), s.LatMax.Round(time.Millisecond))
	n := 0.0
	for _, e := range s.Ejections {
		n += e.Value
	}
	fmt.Fprintf(tw, "Ejections\t%.0f by a trip rule (journal): %s\n", n, joinLabeled(s.Ejections))
	fmt.Fprintf(tw, "  metric\tswitchyard_ejections_total %.0f, of which %.0f with reason ProbeFailed (a failed probe restarting the cooldown)\n",
		s.EjectionsMetric, s.EjectionsMetricProbe)
	_ = tw.Flush()

	for _, k := range s.Keys {
		fmt.Fprintf(w, "\n%s × %s (mock: %s)\n", s.Channel, k.Model, orDash(k.Mode))
		if k.Ejected {
			fmt.Fprintf(w, "  first failure → ejection   %s   by %s: %s\n", secs(k.ToEjection), k.Rule, k.Message)
			if k.Quiet && k.ToEjection-k.ToQuiet >= 2*time.Second {
				fmt.Fprintf(w, "  (client traffic had left it by %s: its attempts stopped growing then, polled once a second)\n", secs(k.ToQuiet))
			}
		} else {
			fmt.Fprintf(w, "  first failure → ejection   never\n")
		}
		fmt.Fprintf(w, "  during the incident        %.0f failed client attempt(s) on it, %d ejection(s), %d failed probe(s)\n",
			k.FailedAttempts, k.Ejections, k.ProbeFailures)
		switch {
		case !k.Recovered:
			fmt.Fprintf(w, "  recovery                   not played\n")
		case k.Healthy:
			fmt.Fprintf(w, "  recovery → full traffic    %s (RampCompleted, Healthy); probes passed at %s, 100%% share at %s\n",
				secs(k.ToHealthy), secs(k.ToRamp), secs(k.ToFull))
		case k.Ramp:
			fmt.Fprintf(w, "  recovery → full traffic    not reached (probes passed at %s; phase now %s)\n", secs(k.ToRamp), orDash(k.FinalPhase))
		default:
			fmt.Fprintf(w, "  recovery → full traffic    not reached (phase now %s)\n", orDash(k.FinalPhase))
		}
	}
	fmt.Fprintf(w, "\nRules (compiled from the demo manifests)\n")
	for _, r := range s.Rules {
		fmt.Fprintf(w, "  %s\n", r)
	}
	if len(s.Notes) > 0 {
		fmt.Fprintf(w, "\nNotes\n")
		for _, n := range s.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	if len(s.Problems) == 0 {
		fmt.Fprintf(w, "\nResult: the story happened — %s failed, was ejected, and came back to full traffic.\n", s.Channel)
	} else {
		fmt.Fprintf(w, "\nResult: the story did NOT happen:\n")
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
	}
}

// newEjection is health.NewEjection of an event as the admin API journals it.
func newEjection(ev adminapi.Event) bool {
	from, _ := health.ParsePhase(ev.From)
	to, err := health.ParsePhase(ev.To)
	return err == nil && health.NewEjection(from, to, ev.Reason)
}
