package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/textout"
)

// Report is the result of a replay. Its JSON form is byte-identical for the same input and
// options: no wall-clock figure and no map iteration reach it.
type Report struct {
	Models    []ModelReport   `json:"models"`
	Log       LogSummary      `json:"log"`
	Problems  []Problem       `json:"problems"`
	Channels  []ChannelReport `json:"channels"`
	Incidents *IncidentReport `json:"incidents,omitempty"`
}

// ModelReport is one replayed model with the policy settings that mattered and its requests.
type ModelReport struct {
	Model      string   `json:"model"`
	Policy     string   `json:"policy"`
	Scenario   string   `json:"scenario"`
	Strategy   string   `json:"strategy"`
	Candidates []string `json:"candidates"`
	// Rollout is the policy's spec.rollout ("Enforce 50%", "DryRun"); absent when the policy
	// steers every request.
	Rollout  string        `json:"rollout,omitempty"`
	Settings SettingsBrief `json:"settings"`
	Requests RequestReport `json:"requests"`
}

// SettingsBrief are the resolved numbers a reader needs to read the events.
type SettingsBrief struct {
	Window              string `json:"window"`
	MinRequests         int    `json:"minRequests"`
	ErrorRatePercent    int    `json:"errorRatePercent"`
	ConsecutiveFailures int    `json:"consecutiveFailures"`
	TimeoutRatePercent  int    `json:"timeoutRatePercent"`
	LatencyP95          string `json:"latencyP95"`
	EjectBelow          int    `json:"ejectBelow"`
	EjectAfter          string `json:"ejectAfter"`
	Cooldown            string `json:"cooldown"`
	MaxCooldown         string `json:"maxCooldown"`
	ProbeInterval       string `json:"probeInterval"`
	ProbeSuccesses      int    `json:"probeSuccessesRequired"`
	ProbeMaxLatency     string `json:"probeMaxLatency"`
	RampSteps           []int  `json:"rampSteps"`
	RampHold            string `json:"rampHold"`
	MaxAttempts         int    `json:"maxAttempts"`
	PanicRouting        bool   `json:"panicRouting"`
}

// LogSummary counts what was read.
type LogSummary struct {
	From    string  `json:"from,omitempty"`
	To      string  `json:"to,omitempty"`
	Seconds float64 `json:"seconds"`
	// Lines is every non-blank line read; Attempts the ones replayed; Requests the client
	// requests they form (by requestId, else one per line).
	Lines    int64 `json:"lines"`
	Attempts int64 `json:"attempts"`
	Requests int64 `json:"requests"`
	// Probes: lines marked "probe": true (the logging proxy's own probes): evidence of the
	// channel's health and answers to the replayed policy's probes, never client requests.
	Probes int64 `json:"probes"`
	// Skipped lines by cause, and the lines accepted out of order and sorted into place.
	Malformed      int64 `json:"malformed"`
	UnknownChannel int64 `json:"unknownChannel"`
	OutOfOrder     int64 `json:"outOfOrder"`
	Reordered      int64 `json:"reordered"`
	// BeforeSince: lines older than Options.Since, skipped.
	BeforeSince int64 `json:"beforeSince,omitempty"`
}

// Problem is one input line that could not be used as it is. Line is 1-based.
type Problem struct {
	Line    int64  `json:"line"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// ChannelReport is one channel×model.
type ChannelReport struct {
	Channel       string        `json:"channel"`
	Model         string        `json:"model"`
	Ejections     int           `json:"ejections"`
	Events        []EventReport `json:"events"`
	EventsOmitted int           `json:"eventsOmitted,omitempty"`
	Phases        []PhaseReport `json:"phases"`
	Probes        ProbeReport   `json:"probes"`
	Requests      RequestReport `json:"requests"`
}

// EventReport is one journal entry of the engine.
type EventReport struct {
	At      string `json:"at"`
	From    string `json:"from"`
	To      string `json:"to"`
	Reason  string `json:"reason"`
	Actor   string `json:"actor"`
	Message string `json:"message"`
}

// PhaseReport is the time a key spent in one phase and the logged traffic in that time:
// Logged attempts happened then; Carried is what the policy would have sent to the channel
// (and so fed to the engine).
type PhaseReport struct {
	Phase           string  `json:"phase"`
	Seconds         float64 `json:"seconds"`
	TimePercent     float64 `json:"timePercent"`
	LoggedAttempts  int64   `json:"loggedAttempts"`
	CarriedAttempts int64   `json:"carriedAttempts"`
}

// ProbeReport counts probes: issued by the engine's schedule, answered by a logged attempt, and
// unanswered (no logged attempt on the channel within the probe's max latency).
type ProbeReport struct {
	Issued     int `json:"issued"`
	Answered   int `json:"answered"`
	Unanswered int `json:"unanswered"`
}

// RequestReport is the client-visible view of the requests whose first logged attempt went to a
// channel (or of a whole model). Client errors are left out of the rates.
type RequestReport struct {
	Requests                     int64   `json:"requests"`
	ClientErrors                 int64   `json:"clientErrors"`
	FailedWithoutFailover        int64   `json:"failedWithoutFailover"`
	FailedWithoutFailoverPercent float64 `json:"failedWithoutFailoverPercent"`
	FailedAsLogged               int64   `json:"failedAsLogged"`
	FailedAsLoggedPercent        float64 `json:"failedAsLoggedPercent"`
	FailedWithPolicy             int64   `json:"failedWithPolicy"`
	FailedWithPolicyPercent      float64 `json:"failedWithPolicyPercent"`
	// Rerouted: the policy's first choice was not the logged first channel.
	Rerouted int64 `json:"rerouted"`
	// FailedOver: the policy answered the request on a later attempt.
	FailedOver int64 `json:"failedOver"`
	// Assumed: the verdict rests on at least one attempt without logged evidence (assumed to
	// succeed on a normally routed channel, to fail on a panic route).
	Assumed int64 `json:"assumed"`
	// Listed: the requests the replayed policy's spec.rollout put in the listed cohort (the
	// listed channels in order, ejections ignored; every request of a DryRun), as the proxy
	// would (failover.ChooseCohort); FailedListed: those of them that failed with the policy.
	// The other requests are the policy's cohort. Absent without a rollout.
	Listed       int64 `json:"listed,omitempty"`
	FailedListed int64 `json:"failedListed,omitempty"`
}

func (q *RequestReport) percents() {
	q.FailedWithoutFailoverPercent = pct(q.FailedWithoutFailover, q.Requests)
	q.FailedAsLoggedPercent = pct(q.FailedAsLogged, q.Requests)
	q.FailedWithPolicyPercent = pct(q.FailedWithPolicy, q.Requests)
}

func pct(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return math.Round(float64(n)*100*1000/float64(d)) / 1000
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func seconds(ns int64) float64 { return math.Round(float64(ns)/1e6) / 1e3 }

func formatTS(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// offOr prints a rule threshold, or "off" for the zero that turns the rule off (chat's
// timeoutRate: "0%" would read as "any timeout ejects").
func offOr(n int, unit string) string {
	if n == 0 {
		return "off"
	}
	return strconv.Itoa(n) + unit
}

func durString(d time.Duration) string {
	if d == 0 {
		return "off"
	}
	return d.String()
}

// finish closes the books at the last line's time.
func (r *replayer) finish() *Report {
	rep := &Report{Problems: r.problems}
	end := r.clock
	if r.started {
		r.eng.Tick(tm(end))
		r.drain(end)
	}
	for r.qHead < len(r.queue) {
		r.resolve(r.queue[r.qHead])
		r.qHead++
	}
	for mi := range r.setup.Models {
		m := &r.setup.Models[mi]
		s := &m.Settings
		mr := ModelReport{Model: m.Model, Policy: m.Policy, Scenario: m.Scenario, Strategy: m.Strategy.String(),
			Settings: SettingsBrief{
				Window: s.Window.String(), MinRequests: s.MinRequests, ErrorRatePercent: s.ErrorRatePercent,
				ConsecutiveFailures: s.ConsecutiveFailures, TimeoutRatePercent: s.TimeoutRatePercent,
				LatencyP95: durString(s.LatencyP95), EjectBelow: s.EjectBelow, EjectAfter: s.EjectAfter.String(),
				Cooldown: s.Cooldown.String(), MaxCooldown: s.MaxCooldown.String(), ProbeInterval: s.ProbeInterval.String(),
				ProbeSuccesses: s.ProbeSuccessesRequired, ProbeMaxLatency: s.ProbeMaxLatency.String(),
				RampSteps: s.RampSteps, RampHold: s.RampHold.String(), MaxAttempts: m.MaxAttempts, PanicRouting: m.PanicRouting,
			},
			Requests: r.models[mi]}
		for _, c := range m.Candidates {
			mr.Candidates = append(mr.Candidates, c.Channel)
		}
		if ro := m.policy.Rollout; ro != nil {
			mr.Rollout = fmt.Sprintf("Enforce %d%%", ro.Percent)
			if ro.DryRun {
				mr.Rollout = "DryRun"
			}
		}
		mr.Requests.percents()
		rep.Models = append(rep.Models, mr)
	}
	sum := r.sum
	if r.started {
		sum.From, sum.To, sum.Seconds = formatTS(r.first), formatTS(end), seconds(end-r.first)
	}
	rep.Log = sum
	span := end - r.first
	// Keys in model order, then policy order: the order the policy lists them.
	for mi := range r.setup.Models {
		for _, ki := range r.modelKey[mi] {
			ks := r.keys[ki]
			if r.started {
				ks.setPhase(ks.phase, end) // closes the current stretch
				if ks.isOut {
					ks.out = append(ks.out, interval{ks.outStart, end})
				}
				if ks.probePending {
					ks.probes.Unanswered++
					ks.probePending = false
				}
			}
			cr := ChannelReport{Channel: ks.key.Channel, Model: ks.key.Model, Ejections: len(ks.ejections),
				Events: ks.events, EventsOmitted: ks.eventsOmitted, Probes: ks.probes, Requests: ks.req}
			if cr.Events == nil {
				cr.Events = []EventReport{}
			}
			for p := range numPhases {
				if ks.phaseNs[p] == 0 && ks.logged[p] == 0 {
					continue
				}
				share := 0.0
				if span > 0 {
					share = round2(float64(ks.phaseNs[p]) * 100 / float64(span))
				}
				cr.Phases = append(cr.Phases, PhaseReport{Phase: health.Phase(p).String(), Seconds: seconds(ks.phaseNs[p]),
					TimePercent: share, LoggedAttempts: ks.logged[p], CarriedAttempts: ks.carried[p]})
			}
			if cr.Phases == nil {
				cr.Phases = []PhaseReport{}
			}
			cr.Requests.percents()
			rep.Channels = append(rep.Channels, cr)
		}
	}
	if r.opts.Incidents != nil {
		rep.Incidents = r.scoreIncidents()
	}
	if rep.Problems == nil {
		rep.Problems = []Problem{}
	}
	return rep
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteTable writes the report for people.
func (rep *Report) WriteTable(w io.Writer) error {
	bw := &textout.Writer{W: w}
	p := bw.Printf
	for _, m := range rep.Models {
		s := m.Settings
		rollout := ""
		if m.Rollout != "" {
			rollout = ", rollout " + m.Rollout
		}
		p("Model %s: policy %s (scenario %s, strategy %s%s), candidates %s\n", m.Model, m.Policy, m.Scenario, m.Strategy, rollout, strings.Join(m.Candidates, ", "))
		p("  window %s, minRequests %d, errorRate %s, consecutive %s, timeoutRate %s, p95 limit %s, cooldown %s, ramp %v x %s, maxAttempts %d\n",
			s.Window, s.MinRequests, offOr(s.ErrorRatePercent, "%"), offOr(s.ConsecutiveFailures, ""), offOr(s.TimeoutRatePercent, "%"),
			s.LatencyP95, s.Cooldown, s.RampSteps, s.RampHold, s.MaxAttempts)
	}
	l := rep.Log
	p("\nLog: %d lines, %d attempts replayed, %d requests, %d logged probes", l.Lines, l.Attempts, l.Requests, l.Probes)
	if l.From != "" {
		p(", %s .. %s (%s)", l.From, l.To, time.Duration(l.Seconds*float64(time.Second)).Round(time.Millisecond))
	}
	p("\nSkipped: %d malformed, %d unknown channel/model, %d out of order; %d sorted into place\n",
		l.Malformed, l.UnknownChannel, l.OutOfOrder, l.Reordered)
	for _, pr := range rep.Problems {
		p("  line %d: %s: %s\n", pr.Line, pr.Kind, pr.Message)
	}
	for _, c := range rep.Channels {
		p("\n%s × %s: %d ejection(s)\n", c.Channel, c.Model, c.Ejections)
		if len(c.Events) > 0 {
			tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
			for _, e := range c.Events {
				fmt.Fprintf(tw, "  %s\t%s -> %s\t%s\t%s\n", e.At, e.From, e.To, e.Reason, e.Message)
			}
			tw.Flush()
			if c.EventsOmitted > 0 {
				p("  ... %d more events omitted\n", c.EventsOmitted)
			}
		}
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  phase\ttime\tshare of time\tlogged attempts\tcarried by policy\t\n")
		for _, ph := range c.Phases {
			fmt.Fprintf(tw, "  %s\t%s\t%.2f%%\t%d\t%d\t\n", ph.Phase,
				time.Duration(ph.Seconds*float64(time.Second)).Round(time.Second), ph.TimePercent, ph.LoggedAttempts, ph.CarriedAttempts)
		}
		tw.Flush()
		if c.Probes.Issued > 0 {
			p("  probes: %d issued, %d answered by logged attempts, %d unanswered\n", c.Probes.Issued, c.Probes.Answered, c.Probes.Unanswered)
		}
		writeRequests(p, "  requests first sent here", c.Requests)
	}
	p("\n")
	for _, m := range rep.Models {
		writeRequests(p, "Model "+m.Model, m.Requests)
	}
	if ir := rep.Incidents; ir != nil {
		p("\nIncidents: %d, detected %d, missed %d; false ejections %d", ir.Total, ir.Detected, ir.Missed, ir.FalseEjections)
		if ir.Detected > 0 {
			p("; detection delay p50 %s, p95 %s, max %s", secs(ir.DelayP50), secs(ir.DelayP95), secs(ir.DelayMax))
		}
		p("\n")
		for _, it := range ir.Items {
			verdict := "MISSED"
			if it.Detected {
				verdict = "detected after " + secs(it.DelaySeconds)
				if it.EjectedAt == "" {
					verdict = "already out of rotation at its start"
				} else {
					verdict += " (" + it.Reason + ")"
				}
			}
			p("  %s × %s  %s .. %s  %s\n", it.Channel, it.Model, it.Start, it.End, verdict)
		}
		for _, u := range ir.Unknown {
			p("  not scored: %s\n", u)
		}
		for _, f := range ir.False {
			p("  false ejection: %s × %s at %s: %s: %s\n", f.Channel, f.Model, f.At, f.Reason, f.Message)
		}
	}
	return bw.Err
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

func writeRequests(p func(string, ...any), title string, q RequestReport) {
	p("%s: %d requests (%d client errors left out); failed without failover %d (%.3f%%), as logged %d (%.3f%%), with this policy %d (%.3f%%)",
		title, q.Requests, q.ClientErrors, q.FailedWithoutFailover, q.FailedWithoutFailoverPercent,
		q.FailedAsLogged, q.FailedAsLoggedPercent, q.FailedWithPolicy, q.FailedWithPolicyPercent)
	p("; %d rerouted, %d failed over, %d rest on an assumed attempt", q.Rerouted, q.FailedOver, q.Assumed)
	if q.Listed > 0 {
		p("; %d in the listed cohort (%d of them failed), %d in the policy's", q.Listed, q.FailedListed, q.Requests-q.Listed)
	}
	p("\n")
}
