package demo

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
)

// frame is everything one refresh of the live view shows. It is filled from the proxy's admin
// API and metrics (and, where marked, the generator's own counts); rendering it is pure.
type frame struct {
	Elapsed   time.Duration
	Stage     string        // steady, incident, recovery, finishing
	StageLeft time.Duration // time left in the stage; 0 when it ends on an event
	Banner    string        // what the mocks are doing
	Rate      float64       // generator requests per second, last 5 s
	Clients   []clientRow
	Failovers float64 // switchyard_failovers_total
	Rows      []row
	Log       []string // demo actions and journal lines, oldest first
	LogTotal  int      // lines so far (Log may be the tail only)
}

// clientRow is one model's client-visible figures: the proxy's and the generator's.
type clientRow struct {
	Model                   string
	ProxyTotal, ProxyErrors float64 // switchyard_requests_total (outcome != success)
	Gen                     clientStats
}

// row is one channel×model of the table.
type row struct {
	Channel, Model string
	Phase          string
	CooldownLeft   time.Duration // while Ejected
	Score, Traffic int           // admin API
	Served         float64       // share of the model's successful attempts, last 5 s; <0 unknown
	Attempts       float64       // switchyard_upstream_attempts_total, all outcomes but canceled
	Failed         float64       // of which failures
	WindowReq      int
	WindowFail     int
	P95            int64
	Ejections      int
	Panic          bool
}

// rowsFrom builds the table rows from the admin API, the metrics and the served shares.
func rowsFrom(ch adminapi.ChannelsResponse, m Metrics, served map[string]float64) []row {
	att := m.SumBy("switchyard_upstream_attempts_total", nil, "channel", "model", "outcome")
	modelServed := map[string]bool{}
	for k := range served {
		modelServed[modelOf(k)] = true
	}
	out := make([]row, 0, len(ch.Channels))
	for _, c := range ch.Channels {
		r := row{Channel: c.Channel, Model: c.Model, Phase: c.Phase, Score: c.HealthScore, Traffic: c.TrafficPercent,
			WindowReq: c.WindowRequests, WindowFail: c.WindowFailures, P95: c.P95LatencyMillis, Ejections: c.Ejections,
			Panic: c.Panic, Served: -1}
		if c.CooldownUntil != nil {
			r.CooldownLeft = max(c.CooldownUntil.Sub(ch.Now), 0)
		}
		for k, v := range att {
			parts := strings.Split(k, "|")
			if parts[0] != c.Channel || parts[1] != c.Model || parts[2] == "canceled" {
				continue
			}
			r.Attempts += v
			if isFailure(parts[2]) {
				r.Failed += v
			}
		}
		if s, ok := served[c.Channel+"|"+c.Model]; ok {
			r.Served = s
		} else if modelServed[c.Model] {
			r.Served = 0 // its model was answered, by others only
		}
		out = append(out, r)
	}
	return out
}

// isFailure: the outcome classes that count against a channel.
func isFailure(outcome string) bool {
	switch outcome {
	case "server_error", "timeout", "connection_error", "stream_cut":
		return true
	}
	return false
}

// servedShares turns two scrapes of successful attempts per channel|model into each channel's
// share of its model's successful attempts between them. A model with no answers in between
// gets no entry.
func servedShares(before, after map[string]float64) map[string]float64 {
	delta := map[string]float64{}
	perModel := map[string]float64{}
	for k, v := range after {
		d := v - before[k]
		if d < 0 {
			d = 0
		}
		delta[k] = d
		perModel[modelOf(k)] += d
	}
	out := map[string]float64{}
	for k, d := range delta {
		if t := perModel[modelOf(k)]; t > 0 {
			out[k] = d / t
		}
	}
	// Channels that served nothing while others did: 0%.
	for k := range before {
		if _, ok := out[k]; !ok && perModel[modelOf(k)] > 0 {
			out[k] = 0
		}
	}
	return out
}

func modelOf(channelModel string) string {
	_, m, _ := strings.Cut(channelModel, "|")
	return m
}

// clock formats an elapsed time as m:ss.
func clock(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// clockTenths formats an elapsed time as m:ss.t.
func clockTenths(d time.Duration) string {
	d = max(d, 0)
	tenths := int(d.Round(100*time.Millisecond) / (100 * time.Millisecond))
	return fmt.Sprintf("%d:%02d.%d", tenths/600, tenths/10%60, tenths%10)
}

// formatEvent is one journal entry as a log line, its time relative to the demo's start.
func formatEvent(ev adminapi.Event, start time.Time) string {
	phases := ev.To
	if ev.From != ev.To {
		phases = ev.From + " → " + ev.To
	}
	return fmt.Sprintf("%s  %-24s %-22s %s (%s): %s", clockTenths(ev.Time.Sub(start)), ev.Channel+" × "+ev.Model,
		phases, ev.Reason, ev.Actor, ev.Message)
}

// formatAction is one thing the demo did, as a log line.
func formatAction(at time.Duration, msg string) string {
	return fmt.Sprintf("%s  ▶ demo: %s", clockTenths(at), msg)
}

func pct(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", v*100)
}

func phaseCell(r row) string {
	p := r.Phase
	if r.CooldownLeft > 0 {
		p += fmt.Sprintf(" (%ds)", int((r.CooldownLeft + time.Second - 1).Seconds()))
	}
	if r.Panic {
		p += " PANIC"
	}
	return p
}

// stageCell is the stage with the time left in it.
func stageCell(f frame) string {
	s := strings.ToUpper(f.Stage)
	if f.StageLeft > 0 {
		s += fmt.Sprintf(" (%s left)", clock(f.StageLeft+time.Second-1))
	}
	return s
}

// renderFrame is the full live view: header, channel table, client figures and the log tail.
func renderFrame(f frame) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Switchyard demo   %s   %s\n", clock(f.Elapsed), stageCell(f))
	if f.Banner != "" {
		fmt.Fprintf(&b, "%s\n", f.Banner)
	}
	fmt.Fprintf(&b, "Traffic %.1f req/s   failovers %.0f (switchyard_failovers_total)\n\n", f.Rate, f.Failovers)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tMODEL\tPHASE\tSCORE\tTRAFFIC\tSERVED\tATTEMPTS\tFAILED\tWINDOW\tP95\tEJECTED")
	for _, r := range f.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d%%\t%s\t%.0f\t%.0f\t%d/%d\t%s\t%d\n", r.Channel, r.Model, phaseCell(r),
			r.Score, r.Traffic, pct(r.Served), r.Attempts, r.Failed, r.WindowReq, r.WindowFail, millis(r.P95), r.Ejections)
	}
	_ = tw.Flush()
	b.WriteString("TRAFFIC share the engine allows · SERVED share of the model's answers, last 5s · WINDOW requests/failures\n\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENTS\tREQUESTS\tERRORS\tSUCCESS\t│ GENERATOR: SENT\tERRORS\tFAILED OVER")
	for _, c := range f.Clients {
		name := c.Model
		if name == "" {
			name = "all"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t│ %d\t%d\t%d\n", name, c.ProxyTotal, c.ProxyErrors,
			successPct(c.ProxyTotal-c.ProxyErrors, c.ProxyTotal), c.Gen.Sent, c.Gen.Errors, c.Gen.FailedOver)
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nJournal (GET /admin/v1/events) and demo actions, %d so far:\n", f.LogTotal)
	for _, l := range f.Log {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// millis shows a p95 in milliseconds; "-" when the window has no successes to measure.
func millis(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return fmt.Sprintf("%dms", ms)
}

func successPct(ok, total float64) string {
	if total <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", ok*100/total)
}

// fitScreen cuts a rendered frame to a terminal of cols×rows (0: unknown, no limit): long lines
// are cut (a wrapped line would break the in-place redraw) and, when the frame is too tall, the
// oldest log lines go first.
func fitScreen(text string, logLines, cols, rows int) []string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if rows > 0 && len(lines) > rows-1 {
		drop := min(len(lines)-(rows-1), max(logLines-1, 0))
		head := len(lines) - logLines
		lines = append(lines[:head:head], lines[head+drop:]...)
	}
	if cols > 0 {
		for i, l := range lines {
			if r := []rune(l); len(r) > cols-1 {
				lines[i] = string(r[:cols-2]) + "…"
			}
		}
	}
	return lines
}

// renderStatus is the one-line view for logs (stdout not a terminal).
func renderStatus(f frame) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s %s] %.1f req/s", clock(f.Elapsed), strings.ToLower(stageCell(f)), f.Rate)
	for _, c := range f.Clients {
		if c.Model == "" {
			fmt.Fprintf(&b, ", %.0f requests, %.0f client errors", c.ProxyTotal, c.ProxyErrors)
		}
	}
	fmt.Fprintf(&b, ", %.0f failovers", f.Failovers)
	for _, r := range f.Rows {
		fmt.Fprintf(&b, " | %s/%s %s score %d traffic %d%% served %s", r.Channel, r.Model, phaseCell(r), r.Score, r.Traffic, pct(r.Served))
	}
	return b.String()
}
