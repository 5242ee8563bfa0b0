package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/replay"
)

// Review is the monthly review. Its JSON form is byte-identical for the same inputs.
type Review struct {
	Since string            `json:"since,omitempty"`
	Log   replay.LogSummary `json:"log"`
	// Channels: per provider channel × model, in policy order.
	Channels  []ChannelReview `json:"channels"`
	Questions Questions       `json:"questions"`
	// Ejections: every ejection with its false-ejection verdict and its way back.
	Ejections     []EjectionReview `json:"ejections"`
	MissedOutages []MissedOutage   `json:"missedOutages"`
	Notes         []string         `json:"notes"`
}

// ChannelReview is one channel×model's month.
type ChannelReview struct {
	Channel string `json:"channel"`
	Model   string `json:"model"`
	// From the log: client attempts (probes and client errors left out), failures among them
	// (5xx, timeouts, connection errors, cut streams; 429 is counted apart, not a failure).
	Attempts         int64   `json:"attempts"`
	Failures         int64   `json:"failures"`
	ErrorRatePercent float64 `json:"errorRatePercent"`
	RateLimited      int64   `json:"rateLimited"`
	ClientErrors     int64   `json:"clientErrors"`
	Probes           int64   `json:"probes"`
	// From the replay: ejections, time out of rotation (Ejected and Probing) and ramping.
	Ejections       int     `json:"ejections"`
	FalseEjections  int     `json:"falseEjections"`
	MissedOutages   int     `json:"missedOutages"`
	EjectedSeconds  float64 `json:"ejectedSeconds"`
	RampingSeconds  float64 `json:"rampingSeconds"`
	Recovered       int     `json:"recovered"`
	RecoverP50      float64 `json:"timeToRecoverP50Seconds"`
	RecoverMax      float64 `json:"timeToRecoverMaxSeconds"`
	FailedOver      int     `json:"failedOverRequests"`
	FailedOverCostS float64 `json:"failedOverLatencySeconds"`
}

// Questions answers the design notes' four questions.
type Questions struct {
	FalseEjections FalseEjectionsAnswer `json:"falseEjections"`
	MissedOutages  MissedOutagesAnswer  `json:"missedOutages"`
	Recovery       RecoveryAnswer       `json:"recovery"`
	Cost           CostAnswer           `json:"cost"`
}

// FalseEjectionsAnswer: how many ejections were for nothing.
type FalseEjectionsAnswer struct {
	Ejections int `json:"ejections"`
	False     int `json:"false"`
	// NotJudged: ejections by a latency rule, or whose model's other channels had fewer than
	// minRequests attempts in the window.
	NotJudged     int     `json:"notJudged"`
	MarginPercent float64 `json:"marginPercentagePoints"`
}

// MissedOutagesAnswer: how many outages the rules let pass.
type MissedOutagesAnswer struct {
	Missed int `json:"missed"`
	// The outage rule: a window of the policy's length with at least MinRequests attempts
	// and at least RatePercent failures ("policy": each policy's own).
	RatePercent string `json:"ratePercent"`
	MinRequests string `json:"minRequests"`
}

// RecoveryAnswer: how fast traffic came back once the provider answered well again.
type RecoveryAnswer struct {
	Ejections int `json:"ejections"`
	Recovered int `json:"recovered"` // Healthy again before the next ejection and the log's end
	// Lag: from the channel's first good answer after the outage (the first logged success
	// after its last logged failure) to Healthy at full traffic.
	LagP50 float64 `json:"lagP50Seconds"`
	LagP95 float64 `json:"lagP95Seconds"`
	LagMax float64 `json:"lagMaxSeconds"`
	// TimeToRecover: from the ejection to Healthy.
	TimeToRecoverP50 float64 `json:"timeToRecoverP50Seconds"`
	TimeToRecoverMax float64 `json:"timeToRecoverMaxSeconds"`
}

// CostAnswer: what switching cost in latency and money.
type CostAnswer struct {
	// FailedOver: requests the log shows answered after at least one failed attempt (429
	// included); Latency: the time their failed attempts took (what the client waited for
	// nothing; back-off waits are not in the log).
	FailedOver     int     `json:"failedOverRequests"`
	LatencySeconds float64 `json:"failedAttemptsLatencySeconds"`
	LatencyP50     float64 `json:"failedAttemptsLatencyP50Seconds"`
	LatencyP95     float64 `json:"failedAttemptsLatencyP95Seconds"`
	LatencyMax     float64 `json:"failedAttemptsLatencyMaxSeconds"`
	// Moved: failed-over requests answered by another channel than their first attempt's.
	// Requests sent straight to another channel while one was ejected are not counted: the
	// log cannot tell them from that channel's own share.
	Moved     int           `json:"movedRequests"`
	Tokens    *int64        `json:"movedTokens,omitempty"` // nil: no audit log given
	Routes    []MovedTokens `json:"movedTo"`
	MoneyUSD  *float64      `json:"movedMoneyUSD,omitempty"` // nil: no price (or no tokens)
	MoneyNote string        `json:"moneyNote,omitempty"`
}

// MovedTokens is the traffic moved from one channel to another of a model.
type MovedTokens struct {
	Model    string   `json:"model"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Requests int      `json:"requests"`
	Tokens   *int64   `json:"tokens,omitempty"`
	MoneyUSD *float64 `json:"moneyUSD,omitempty"`
}

// EjectionReview is one ejection.
type EjectionReview struct {
	Channel string `json:"channel"`
	Model   string `json:"model"`
	At      string `json:"at"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// The logged error rates in the policy's window before the ejection: the channel's and the
	// model's other channels' together.
	OwnRatePercent   float64 `json:"ownErrorRatePercent"`
	OwnAttempts      int64   `json:"ownAttempts"`
	OtherRatePercent float64 `json:"otherErrorRatePercent"`
	OtherAttempts    int64   `json:"otherAttempts"`
	// Verdict: "false", "real", or "not judged: ..." (see docs/report.md).
	Verdict   string `json:"verdict"`
	HealthyAt string `json:"healthyAt,omitempty"`
	FirstGood string `json:"firstGoodAnswer,omitempty"`
	// RecoverSeconds: ejection to Healthy; LagSeconds: first good answer to Healthy.
	RecoverSeconds float64 `json:"timeToRecoverSeconds,omitempty"`
	LagSeconds     float64 `json:"recoveryLagSeconds,omitempty"`
}

// MissedOutage is a stretch of consecutive outage windows during which the channel was never out
// of rotation.
type MissedOutage struct {
	Channel          string  `json:"channel"`
	Model            string  `json:"model"`
	From             string  `json:"from"`
	To               string  `json:"to"`
	Attempts         int64   `json:"attempts"`
	Failures         int64   `json:"failures"`
	ErrorRatePercent float64 `json:"errorRatePercent"`
}

// Run replays log through setup with a collector and builds the review. audit, when not nil, is
// the audit log (the contract's JSON Lines: requestId and tokens), read after the replay for the
// tokens of the moved requests.
func Run(ctx context.Context, setup *replay.Setup, log io.Reader, ropts replay.Options, opts Options, audit io.Reader) (*Review, error) {
	c := NewCollector(setup, opts)
	ropts.Observer = c
	rep, err := replay.Run(ctx, setup, log, ropts)
	if err != nil {
		return nil, err
	}
	var tokens map[string]int64
	if audit != nil {
		want := map[string]bool{}
		c.flush()
		for _, m := range c.moved {
			want[m.id] = true
		}
		if tokens, err = AuditTokens(audit, want); err != nil {
			return nil, err
		}
	}
	rv := Build(rep, c, tokens)
	if !ropts.Since.IsZero() {
		rv.Since = ropts.Since.UTC().Format(time.RFC3339)
	}
	return rv, nil
}

// AuditTokens reads an audit log and returns prompt+completion tokens of the requests in want.
// A line that is not JSON is an error naming it: the figures must not silently drop requests.
func AuditTokens(r io.Reader, want map[string]bool) (map[string]int64, error) {
	out := map[string]int64{}
	dec := json.NewDecoder(r)
	for line := 1; ; line++ {
		var v struct {
			RequestID string `json:"requestId"`
			Tokens    *struct {
				Prompt     int64 `json:"prompt"`
				Completion int64 `json:"completion"`
			} `json:"tokens"`
		}
		if err := dec.Decode(&v); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("audit log, record %d: %w", line, err)
		}
		if want[v.RequestID] && v.Tokens != nil { // a record without tokens is not a count of 0
			out[v.RequestID] += v.Tokens.Prompt + v.Tokens.Completion
		}
	}
}

// Build turns a replay's report and the collector's figures into the review. tokens (by request
// id) is nil when no audit log was given.
func Build(rep *replay.Report, c *Collector, tokens map[string]int64) *Review {
	c.flush()
	rv := &Review{Log: rep.Log, Ejections: []EjectionReview{}, MissedOutages: []MissedOutage{}, Notes: []string{}}
	phases := map[health.Key]replay.ChannelReport{}
	for _, ch := range rep.Channels {
		phases[health.Key{Channel: ch.Channel, Model: ch.Model}] = ch
	}
	q := &rv.Questions
	q.FalseEjections.MarginPercent = c.opts.SameRateMargin
	var lags, recovers []float64
	for _, ks := range c.keys {
		cr := ChannelReview{Channel: ks.key.Channel, Model: ks.key.Model, Attempts: ks.attempts, Failures: ks.failures,
			ErrorRatePercent: pct(ks.failures, ks.attempts), RateLimited: ks.rateLimited, ClientErrors: ks.clientErrors, Probes: ks.probes}
		for _, ph := range phases[ks.key].Phases {
			switch ph.Phase {
			case health.PhaseEjected.String(), health.PhaseProbing.String():
				cr.EjectedSeconds += ph.Seconds
			case health.PhaseRampingUp.String():
				cr.RampingSeconds += ph.Seconds
			}
		}
		cr.EjectedSeconds = round3(cr.EjectedSeconds)
		var keyRecovers []float64
		for i, j := range ks.judgements {
			er := EjectionReview{Channel: ks.key.Channel, Model: ks.key.Model, At: ts(j.at), Reason: j.reason, Message: j.message,
				OwnRatePercent: round3(rate(j.ownF, j.ownN)), OwnAttempts: j.ownN,
				OtherRatePercent: round3(rate(j.otherF, j.otherN)), OtherAttempts: j.otherN}
			cr.Ejections++
			q.FalseEjections.Ejections++
			switch {
			case j.latencyRule:
				er.Verdict = "not judged: a latency rule"
				q.FalseEjections.NotJudged++
			case !j.judged:
				er.Verdict = "not judged: too little traffic on the other channels"
				q.FalseEjections.NotJudged++
			case j.falseEjected:
				er.Verdict = "false"
				cr.FalseEjections++
				q.FalseEjections.False++
			default:
				er.Verdict = "real"
			}
			q.Recovery.Ejections++
			if i < len(ks.recoveries) {
				r := ks.recoveries[i]
				if r.healthyAt != 0 {
					er.HealthyAt, er.RecoverSeconds = ts(r.healthyAt), secs(r.healthyAt-r.ejectedAt)
					q.Recovery.Recovered++
					cr.Recovered++
					keyRecovers = append(keyRecovers, er.RecoverSeconds)
					if r.firstGood != 0 {
						er.FirstGood, er.LagSeconds = ts(r.firstGood), secs(r.healthyAt-r.firstGood)
						lags = append(lags, er.LagSeconds)
					}
				}
			}
			rv.Ejections = append(rv.Ejections, er)
		}
		recovers = append(recovers, keyRecovers...)
		slices.Sort(keyRecovers)
		cr.RecoverP50, cr.RecoverMax = quantile(keyRecovers, 50), quantile(keyRecovers, 100)
		for _, mo := range c.missed(ks) {
			cr.MissedOutages++
			rv.MissedOutages = append(rv.MissedOutages, mo)
		}
		rv.Channels = append(rv.Channels, cr)
	}
	q.MissedOutages.Missed = len(rv.MissedOutages)
	q.MissedOutages.RatePercent, q.MissedOutages.MinRequests = "policy's errorRatePercent", "policy's minRequests"
	if c.opts.OutageRatePercent > 0 {
		q.MissedOutages.RatePercent = fmt.Sprint(c.opts.OutageRatePercent)
	}
	if c.opts.OutageMinRequests > 0 {
		q.MissedOutages.MinRequests = fmt.Sprint(c.opts.OutageMinRequests)
	}
	slices.Sort(lags)
	slices.Sort(recovers)
	q.Recovery.LagP50, q.Recovery.LagP95, q.Recovery.LagMax = quantile(lags, 50), quantile(lags, 95), quantile(lags, 100)
	q.Recovery.TimeToRecoverP50, q.Recovery.TimeToRecoverMax = quantile(recovers, 50), quantile(recovers, 100)
	c.cost(rv, tokens)
	return rv
}

// missed merges the key's outage windows into stretches and keeps those during which (from the
// first window's start to the last one's end plus one window, the time the rules had to act) the
// key was never out of rotation and never ejected.
func (c *Collector) missed(ks *keyStats) []MissedOutage {
	w := int64(c.settings(ks).Window)
	eps := c.Episodes.Of(ks.key.Channel, ks.key.Model)
	acted := func(from, to int64) bool {
		for _, e := range eps {
			ej := e.EjectedAt.UnixNano()
			back := int64(math.MaxInt64)
			if !e.BackAt.IsZero() {
				back = e.BackAt.UnixNano()
			}
			if ej <= to && back >= from {
				return true
			}
		}
		return false
	}
	var out []MissedOutage
	for i := 0; i < len(ks.hot); {
		j, n, f := i, ks.hot[i].n, ks.hot[i].f
		for j+1 < len(ks.hot) && ks.hot[j+1].from == ks.hot[j].to {
			j++
			n += ks.hot[j].n
			f += ks.hot[j].f
		}
		from, to := ks.hot[i].from, ks.hot[j].to
		if !acted(from, to+w) {
			out = append(out, MissedOutage{Channel: ks.key.Channel, Model: ks.key.Model, From: ts(from), To: ts(to),
				Attempts: n, Failures: f, ErrorRatePercent: pct(f, n)})
		}
		i = j + 1
	}
	return out
}

// cost fills the fourth question.
func (c *Collector) cost(rv *Review, tokens map[string]int64) {
	q := &rv.Questions.Cost
	var lat []float64
	perKey := map[int]*ChannelReview{}
	for i := range rv.Channels {
		perKey[i] = &rv.Channels[i]
	}
	for _, s := range c.costs {
		q.FailedOver++
		sec := s.latency.Seconds()
		lat = append(lat, sec)
		q.LatencySeconds += sec
		perKey[s.key].FailedOver++
		perKey[s.key].FailedOverCostS += sec
	}
	for i := range rv.Channels {
		rv.Channels[i].FailedOverCostS = round3(rv.Channels[i].FailedOverCostS)
	}
	q.LatencySeconds = round3(q.LatencySeconds)
	slices.Sort(lat)
	q.LatencyP50, q.LatencyP95, q.LatencyMax = round3(quantile(lat, 50)), round3(quantile(lat, 95)), round3(quantile(lat, 100))

	type route struct{ from, to int }
	routes := map[route]*MovedTokens{}
	var order []route
	var total int64
	unaudited := 0
	for _, m := range c.moved {
		q.Moved++
		r := route{m.from, m.to}
		mt := routes[r]
		if mt == nil {
			mt = &MovedTokens{Model: c.keys[m.to].key.Model, From: c.keys[m.from].key.Channel, To: c.keys[m.to].key.Channel}
			routes[r] = mt
			order = append(order, r)
		}
		mt.Requests++
		if tokens != nil {
			if _, ok := tokens[m.id]; !ok {
				unaudited++
			}
			if mt.Tokens == nil {
				mt.Tokens = new(int64)
			}
			*mt.Tokens += tokens[m.id]
			total += tokens[m.id]
		}
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].from != order[j].from {
			return order[i].from < order[j].from
		}
		return order[i].to < order[j].to
	})
	q.Routes = []MovedTokens{}
	var money float64
	unpriced := map[string]bool{}
	for _, r := range order {
		mt := routes[r]
		if mt.Tokens != nil {
			if p, ok := c.opts.Prices[mt.Model]; ok {
				v := round6(float64(*mt.Tokens) / 1000 * p)
				mt.MoneyUSD = &v
				money += v
			} else {
				unpriced[mt.Model] = true
			}
		}
		q.Routes = append(q.Routes, *mt)
	}
	switch {
	case tokens == nil:
		q.MoneyNote = "tokens unknown: the access log carries no token counts; give --audit-log for them"
	default:
		q.Tokens = &total
		if len(c.opts.Prices) == 0 {
			q.MoneyNote = "money not computed: give --price MODEL=USD_PER_1K_TOKENS"
		} else {
			v := round6(money)
			q.MoneyUSD = &v
			if len(unpriced) > 0 {
				names := make([]string, 0, len(unpriced))
				for m := range unpriced {
					names = append(names, m)
				}
				slices.Sort(names)
				q.MoneyNote = "no --price for " + strings.Join(names, ", ") + ": its tokens are not in the money"
			}
		}
	}
	if q.MoneyNote != "" {
		rv.Notes = append(rv.Notes, q.MoneyNote)
	}
	if unaudited > 0 {
		rv.Notes = append(rv.Notes, fmt.Sprintf("%d moved requests have no record in the audit log: their tokens are not counted", unaudited))
	}
}

func pct(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return round3(float64(n) * 100 / float64(d))
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }
func secs(ns int64) float64    { return round3(float64(ns) / 1e9) }
func ts(ns int64) string       { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// quantile is the nearest-rank percentile of sorted values (p 100: the maximum); 0 when empty.
func quantile(sorted []float64, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100
	return sorted[max(rank, 1)-1]
}

func sortStrings(s []string) { slices.Sort(s) }
