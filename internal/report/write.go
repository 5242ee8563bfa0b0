package report

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/switchyard-io/switchyard/internal/textout"
)

// WriteJSON writes the review as indented JSON.
func (rv *Review) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(rv, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func dur(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

// WriteTable writes the review for people.
func (rv *Review) WriteTable(w io.Writer) error {
	bw := &textout.Writer{W: w}
	p := func(f string, a ...any) { fmt.Fprintf(bw, f, a...) }
	l := rv.Log
	p("Review of %s .. %s (%s): %d attempts, %d requests", l.From, l.To, dur(l.Seconds), l.Attempts, l.Requests)
	if rv.Since != "" {
		p("; since %s (%d earlier lines skipped)", rv.Since, l.BeforeSince)
	}
	p("\nSkipped: %d malformed, %d unknown channel/model, %d out of order\n\n", l.Malformed, l.UnknownChannel, l.OutOfOrder)

	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "channel × model\tattempts\terror rate\t429\tejections\tfalse\tmissed outages\ttime ejected\tramping\trecovered\trecover p50\tmax\tfailed over\ttheir lost time\t\n")
	for _, c := range rv.Channels {
		fmt.Fprintf(tw, "%s × %s\t%d\t%.3f%%\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t\n", c.Channel, c.Model, c.Attempts,
			c.ErrorRatePercent, c.RateLimited, c.Ejections, c.FalseEjections, c.MissedOutages, dur(c.EjectedSeconds), dur(c.RampingSeconds),
			c.Recovered, dur(c.RecoverP50), dur(c.RecoverMax), c.FailedOver, dur(c.FailedOverCostS))
	}
	tw.Flush()

	q := rv.Questions
	p("\nThe four questions\n")
	fe := q.FalseEjections
	p("1. False ejections: %d of %d ejections (the other channels saw an error rate within %g points of the channel's in the same window); %d not judged\n",
		fe.False, fe.Ejections, fe.MarginPercent, fe.NotJudged)
	mo := q.MissedOutages
	p("2. Missed outages: %d (windows with error rate >= %s and attempts >= %s, never ejected)\n", mo.Missed, mo.RatePercent, mo.MinRequests)
	r := q.Recovery
	p("3. Recovery: %d of %d ejections back to Healthy; from the first good answer to full traffic p50 %s, p95 %s, max %s; ejection to Healthy p50 %s, max %s\n",
		r.Recovered, r.Ejections, dur(r.LagP50), dur(r.LagP95), dur(r.LagMax), dur(r.TimeToRecoverP50), dur(r.TimeToRecoverMax))
	c := q.Cost
	p("4. Cost: %d requests failed over, their failed attempts took %s (p50 %s, p95 %s, max %s per request);\n",
		c.FailedOver, dur(c.LatencySeconds), fmtS(c.LatencyP50), fmtS(c.LatencyP95), fmtS(c.LatencyMax))
	p("   %d of them answered by another channel", c.Moved)
	if c.Tokens != nil {
		p(", %d tokens", *c.Tokens)
	}
	if c.MoneyUSD != nil {
		p(", $%.4f", *c.MoneyUSD)
	}
	p("\n")
	for _, m := range c.Routes {
		p("     %s: %s -> %s: %d requests", m.Model, m.From, m.To, m.Requests)
		if m.Tokens != nil {
			p(", %d tokens", *m.Tokens)
		}
		if m.MoneyUSD != nil {
			p(", $%.4f", *m.MoneyUSD)
		}
		p("\n")
	}
	for _, n := range rv.Notes {
		p("   note: %s\n", n)
	}

	if len(rv.Ejections) > 0 {
		p("\nEjections\n")
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		for _, e := range rv.Ejections {
			back := "not Healthy again"
			if e.HealthyAt != "" {
				back = "Healthy after " + dur(e.RecoverSeconds)
				if e.FirstGood != "" {
					back += fmt.Sprintf(" (%s after its first good answer)", dur(e.LagSeconds))
				}
			}
			fmt.Fprintf(tw, "  %s\t%s × %s\t%s\tchannel %.1f%% (%d), others %.1f%% (%d)\t%s\t%s\n", e.At, e.Channel, e.Model, e.Reason,
				e.OwnRatePercent, e.OwnAttempts, e.OtherRatePercent, e.OtherAttempts, e.Verdict, back)
		}
		tw.Flush()
	}
	if len(rv.MissedOutages) > 0 {
		p("\nMissed outages\n")
		for _, m := range rv.MissedOutages {
			p("  %s × %s  %s .. %s  %d/%d failed (%.1f%%)\n", m.Channel, m.Model, m.From, m.To, m.Failures, m.Attempts, m.ErrorRatePercent)
		}
	}
	return bw.Err
}

func fmtS(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
