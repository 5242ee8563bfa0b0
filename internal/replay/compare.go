package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/textout"
)

// DefaultMaxExamples bounds the requests listed per side in a comparison; all are counted.
const DefaultMaxExamples = 20

// Side is one policy's replay of the log, with what a comparison needs beyond the report.
type Side struct {
	Name   string // how the user named it (the --compare path)
	Report *Report
	// Episodes holds every ejection; Failed every request that failed with the policy's failover,
	// by its first line.
	Episodes Episodes
	Failed   map[int64]RequestOutcome
	// Models is every model this side replayed requests for.
	Models map[string]bool
}

// sideObserver fills a Side during its replay.
type sideObserver struct{ s *Side }

func (o sideObserver) Attempt(LoggedAttempt)   {}
func (o sideObserver) Transition(t Transition) { o.s.Episodes.Add(t) }
func (o sideObserver) Request(r RequestOutcome) {
	o.s.Models[r.Model] = true
	if r.FailedWithPolicy {
		o.s.Failed[r.Line] = r
	}
}

// RunSide replays log against setup and keeps what Compare needs. opts.Observer is replaced.
func RunSide(ctx context.Context, name string, setup *Setup, log io.Reader, opts Options) (*Side, error) {
	s := &Side{Name: name, Failed: map[int64]RequestOutcome{}, Models: map[string]bool{}}
	opts.Observer = sideObserver{s}
	rep, err := Run(ctx, setup, log, opts)
	if err != nil {
		return nil, err
	}
	s.Report = rep
	return s, nil
}

// RunCompare replays one log against two setups, reading it once: the two replays run side by
// side on a copy each. Each is deterministic on its own, so the result is too.
func RunCompare(ctx context.Context, oldName string, oldSetup *Setup, newName string, newSetup *Setup, log io.Reader, opts Options, maxExamples int) (*Comparison, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	oldR, oldW := io.Pipe()
	newR, newW := io.Pipe()
	var wg sync.WaitGroup
	var sides [2]*Side
	var errs [2]error
	for i, run := range []struct {
		name  string
		setup *Setup
		r     *io.PipeReader
	}{{oldName, oldSetup, oldR}, {newName, newSetup, newR}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sides[i], errs[i] = RunSide(ctx, run.name, run.setup, run.r, opts)
			// A replay that stopped early must not leave the copy blocked on its pipe.
			run.r.CloseWithError(errors.New("replay finished"))
		}()
	}
	_, cerr := io.Copy(io.MultiWriter(oldW, newW), log)
	if cerr != nil {
		oldW.CloseWithError(cerr)
		newW.CloseWithError(cerr)
	} else {
		oldW.Close()
		newW.Close()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("replaying %s: %w", []string{oldName, newName}[i], err)
		}
	}
	if cerr != nil {
		return nil, fmt.Errorf("failed to read log: %w", cerr)
	}
	return Compare(sides[0], sides[1], maxExamples), nil
}

// Comparison is the difference between two policies' replays of one log. Its JSON form is
// byte-identical for the same inputs.
type Comparison struct {
	Old string     `json:"old"`
	New string     `json:"new"`
	Log LogSummary `json:"log"` // as the OLD replay read it; NewLog when NEW read it differently
	// NewLog is NEW's reading of the log when it differs from OLD's (a model or channel only
	// one of them routes makes the other skip its lines).
	NewLog   *LogSummary       `json:"newLog,omitempty"`
	Models   []ModelComparison `json:"models"`
	Failed   FailedComparison  `json:"failedRequests"`
	Ejection EjectionSummary   `json:"ejections"`
	// Ejections lists every ejection gained or lost, and the ones both made, by channel×model
	// and time.
	Ejections []EjectionChange  `json:"ejectionList"`
	Phases    []PhaseComparison `json:"phases"`
	Incidents *IncidentCompare  `json:"incidents,omitempty"`
	// NewWorse: NEW fails more of the requests both replayed than OLD does (the exit status 1).
	NewWorse bool   `json:"newWorse"`
	Verdict  string `json:"verdict"`
}

// ModelComparison is one model's client-visible failures under each policy.
type ModelComparison struct {
	Model     string         `json:"model"`
	OldPolicy string         `json:"oldPolicy,omitempty"` // empty: OLD does not route the model
	NewPolicy string         `json:"newPolicy,omitempty"`
	Old       *RequestReport `json:"old,omitempty"`
	New       *RequestReport `json:"new,omitempty"`
}

// FailedComparison counts the requests that failed under one policy and not the other.
type FailedComparison struct {
	// OldTotal and NewTotal: requests that failed with each policy's failover, among the
	// requests of the models both route.
	OldTotal int `json:"oldTotal"`
	NewTotal int `json:"newTotal"`
	Both     int `json:"both"`
	OnlyOld  int `json:"onlyOld"`
	OnlyNew  int `json:"onlyNew"`
	// NotCompared: failed requests of a model only one side routes.
	NotCompared int `json:"notCompared"`
	// Examples, oldest first, at most the comparison's maxExamples per side.
	OnlyOldExamples []FailedRequest `json:"onlyOldExamples"`
	OnlyNewExamples []FailedRequest `json:"onlyNewExamples"`
}

// FailedRequest is one request that failed under one policy only.
type FailedRequest struct {
	RequestID    string `json:"requestId"`
	Line         int64  `json:"line"`
	At           string `json:"at"`
	Model        string `json:"model"`
	FirstChannel string `json:"firstChannel"` // the logged first attempt's channel
	// Attempts the policy it failed under made; Assumed: its verdict rests on an attempt
	// without logged evidence.
	Attempts int  `json:"attempts"`
	Assumed  bool `json:"assumed,omitempty"`
}

// EjectionSummary counts ejections.
type EjectionSummary struct {
	Old    int `json:"old"`
	New    int `json:"new"`
	Both   int `json:"both"`
	Gained int `json:"gained"` // NEW ejects, OLD did not
	Lost   int `json:"lost"`   // OLD ejected, NEW does not
}

// EjectionChange is one ejection of either side. Two ejections of the same channel×model are the
// same one (Change "both") when their stretches out of rotation overlap; each pairs with at most
// one of the other side, the earliest overlapping. The others are "gained" (NEW only) or "lost"
// (OLD only).
type EjectionChange struct {
	Channel string       `json:"channel"`
	Model   string       `json:"model"`
	Change  string       `json:"change"`
	Old     *EjectionRef `json:"old,omitempty"`
	New     *EjectionRef `json:"new,omitempty"`
	// ShiftSeconds: NEW's ejection time minus OLD's, for "both" (negative: NEW ejects earlier).
	ShiftSeconds float64 `json:"shiftSeconds,omitempty"`
}

// EjectionRef is one side's ejection.
type EjectionRef struct {
	At      string `json:"at"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// OutSeconds is how long it kept the channel out of rotation (Ejected and Probing).
	OutSeconds float64 `json:"outOfRotationSeconds"`
}

// PhaseComparison is one channel×model's time in each phase under each policy.
type PhaseComparison struct {
	Channel string            `json:"channel"`
	Model   string            `json:"model"`
	Phases  []PhaseSideBySide `json:"phases"`
}

// PhaseSideBySide is one phase's seconds under each policy.
type PhaseSideBySide struct {
	Phase        string  `json:"phase"`
	OldSeconds   float64 `json:"oldSeconds"`
	NewSeconds   float64 `json:"newSeconds"`
	DeltaSeconds float64 `json:"deltaSeconds"`
}

// IncidentCompare is both sides' incident scores, when --incidents was given.
type IncidentCompare struct {
	Old IncidentTotals `json:"old"`
	New IncidentTotals `json:"new"`
}

// IncidentTotals are the headline figures of an IncidentReport.
type IncidentTotals struct {
	Total          int     `json:"total"`
	Detected       int     `json:"detected"`
	Missed         int     `json:"missed"`
	FalseEjections int     `json:"falseEjections"`
	DelayP50       float64 `json:"detectionDelayP50Seconds"`
	DelayMax       float64 `json:"detectionDelayMaxSeconds"`
}

// Compare sets two replays of the same log side by side. It is a pure function of its inputs.
func Compare(old, nw *Side, maxExamples int) *Comparison {
	if maxExamples <= 0 {
		maxExamples = DefaultMaxExamples
	}
	c := &Comparison{Old: old.Name, New: nw.Name, Log: old.Report.Log, Ejections: []EjectionChange{}, Phases: []PhaseComparison{}}
	if nw.Report.Log != old.Report.Log {
		l := nw.Report.Log
		c.NewLog = &l
	}
	c.Models = compareModels(old.Report, nw.Report)
	c.Failed = compareFailed(old, nw, maxExamples)
	c.Ejections, c.Ejection = compareEjections(old, nw)
	c.Phases = comparePhases(old.Report, nw.Report)
	if old.Report.Incidents != nil && nw.Report.Incidents != nil {
		c.Incidents = &IncidentCompare{Old: totals(old.Report.Incidents), New: totals(nw.Report.Incidents)}
	}
	f := &c.Failed
	c.NewWorse = f.NewTotal > f.OldTotal
	switch {
	case c.NewWorse:
		c.Verdict = fmt.Sprintf("NEW is worse: %d failed requests against %d (%d fail only under NEW, %d only under OLD)",
			f.NewTotal, f.OldTotal, f.OnlyNew, f.OnlyOld)
	case f.NewTotal < f.OldTotal:
		c.Verdict = fmt.Sprintf("NEW is better: %d failed requests against %d (%d fail only under NEW, %d only under OLD)",
			f.NewTotal, f.OldTotal, f.OnlyNew, f.OnlyOld)
	default:
		c.Verdict = fmt.Sprintf("NEW is not worse: %d failed requests under each (%d fail only under NEW, %d only under OLD)",
			f.NewTotal, f.OnlyNew, f.OnlyOld)
	}
	return c
}

func totals(ir *IncidentReport) IncidentTotals {
	return IncidentTotals{Total: ir.Total, Detected: ir.Detected, Missed: ir.Missed, FalseEjections: ir.FalseEjections,
		DelayP50: ir.DelayP50, DelayMax: ir.DelayMax}
}

func compareModels(old, nw *Report) []ModelComparison {
	idx := map[string]int{}
	var out []ModelComparison
	get := func(model string) *ModelComparison {
		if i, ok := idx[model]; ok {
			return &out[i]
		}
		idx[model] = len(out)
		out = append(out, ModelComparison{Model: model})
		return &out[len(out)-1]
	}
	for _, m := range old.Models {
		mc := get(m.Model)
		q := m.Requests
		mc.OldPolicy, mc.Old = m.Policy, &q
	}
	for _, m := range nw.Models {
		mc := get(m.Model)
		q := m.Requests
		mc.NewPolicy, mc.New = m.Policy, &q
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	if out == nil {
		out = []ModelComparison{}
	}
	return out
}

func compareFailed(old, nw *Side, maxExamples int) FailedComparison {
	f := FailedComparison{OnlyOldExamples: []FailedRequest{}, OnlyNewExamples: []FailedRequest{}}
	var onlyOld, onlyNew []int64
	for line, r := range old.Failed {
		if !nw.Models[r.Model] {
			f.NotCompared++
			continue
		}
		f.OldTotal++
		if _, both := nw.Failed[line]; both {
			f.Both++
		} else {
			onlyOld = append(onlyOld, line)
		}
	}
	for line, r := range nw.Failed {
		if !old.Models[r.Model] {
			f.NotCompared++
			continue
		}
		f.NewTotal++
		if _, both := old.Failed[line]; !both {
			onlyNew = append(onlyNew, line)
		}
	}
	f.OnlyOld, f.OnlyNew = len(onlyOld), len(onlyNew)
	// Lines are in log order; the requests' first lines sort them by time up to the reorder
	// tolerance, which is the order a reader looks for them in the log.
	sortByTime := func(lines []int64, s *Side) {
		sort.Slice(lines, func(i, j int) bool {
			a, b := s.Failed[lines[i]], s.Failed[lines[j]]
			if !a.At.Equal(b.At) {
				return a.At.Before(b.At)
			}
			return lines[i] < lines[j]
		})
	}
	sortByTime(onlyOld, old)
	sortByTime(onlyNew, nw)
	example := func(r RequestOutcome) FailedRequest {
		return FailedRequest{RequestID: r.ID, Line: r.Line, At: formatTS(r.At.UnixNano()), Model: r.Model,
			FirstChannel: r.FirstChannel, Attempts: r.PolicyAttempts, Assumed: r.Assumed}
	}
	for _, l := range onlyOld[:min(len(onlyOld), maxExamples)] {
		f.OnlyOldExamples = append(f.OnlyOldExamples, example(old.Failed[l]))
	}
	for _, l := range onlyNew[:min(len(onlyNew), maxExamples)] {
		f.OnlyNewExamples = append(f.OnlyNewExamples, example(nw.Failed[l]))
	}
	return f
}

func compareEjections(old, nw *Side) ([]EjectionChange, EjectionSummary) {
	end := func(s *Side) time.Time {
		if s.Report.Log.To == "" {
			return time.Time{}
		}
		t, _ := time.Parse(time.RFC3339Nano, s.Report.Log.To)
		return t
	}
	oldEnd, newEnd := end(old), end(nw)
	outUntil := func(e *Episode, logEnd time.Time) time.Time {
		if e.BackAt.IsZero() {
			return logEnd
		}
		return e.BackAt
	}
	ref := func(e *Episode, logEnd time.Time) *EjectionRef {
		return &EjectionRef{At: formatTS(e.EjectedAt.UnixNano()), Reason: e.Reason, Message: e.Message,
			OutSeconds: seconds(outUntil(e, logEnd).Sub(e.EjectedAt).Nanoseconds())}
	}
	var changes []EjectionChange
	var sum EjectionSummary
	// Keys in the order the reports list them (model, then policy order), OLD's then NEW's extra ones.
	seen := map[health.Key]bool{}
	var keys []health.Key
	for _, rep := range []*Report{old.Report, nw.Report} {
		for _, ch := range rep.Channels {
			k := health.Key{Channel: ch.Channel, Model: ch.Model}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		oe, ne := old.Episodes.Of(k.Channel, k.Model), nw.Episodes.Of(k.Channel, k.Model)
		sum.Old += len(oe)
		sum.New += len(ne)
		pairedNew := make([]bool, len(ne))
		var kc []EjectionChange
		for i := range oe {
			o := &oe[i]
			oFrom, oTo := o.EjectedAt, outUntil(o, oldEnd)
			match := -1
			for j := range ne {
				if pairedNew[j] {
					continue
				}
				n := &ne[j]
				nFrom, nTo := n.EjectedAt, outUntil(n, newEnd)
				if nFrom.Before(oTo) && oFrom.Before(nTo) || nFrom.Equal(oFrom) {
					match = j
					break
				}
			}
			if match < 0 {
				kc = append(kc, EjectionChange{Channel: k.Channel, Model: k.Model, Change: "lost", Old: ref(o, oldEnd)})
				sum.Lost++
				continue
			}
			pairedNew[match] = true
			n := &ne[match]
			kc = append(kc, EjectionChange{Channel: k.Channel, Model: k.Model, Change: "both", Old: ref(o, oldEnd), New: ref(n, newEnd),
				ShiftSeconds: seconds(n.EjectedAt.Sub(o.EjectedAt).Nanoseconds())})
			sum.Both++
		}
		for j := range ne {
			if !pairedNew[j] {
				kc = append(kc, EjectionChange{Channel: k.Channel, Model: k.Model, Change: "gained", New: ref(&ne[j], newEnd)})
				sum.Gained++
			}
		}
		at := func(c *EjectionChange) string {
			if c.Old != nil && (c.New == nil || c.Old.At <= c.New.At) {
				return c.Old.At
			}
			return c.New.At
		}
		sort.SliceStable(kc, func(i, j int) bool { return at(&kc[i]) < at(&kc[j]) })
		changes = append(changes, kc...)
	}
	if changes == nil {
		changes = []EjectionChange{}
	}
	return changes, sum
}

func comparePhases(old, nw *Report) []PhaseComparison {
	type pk struct{ ch, model string }
	idx := map[pk]int{}
	var out []PhaseComparison
	add := func(rep *Report, isNew bool) {
		for _, ch := range rep.Channels {
			k := pk{ch.Channel, ch.Model}
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, PhaseComparison{Channel: ch.Channel, Model: ch.Model})
			}
			for _, ph := range ch.Phases {
				pc := &out[i]
				j := -1
				for x := range pc.Phases {
					if pc.Phases[x].Phase == ph.Phase {
						j = x
					}
				}
				if j < 0 {
					j = len(pc.Phases)
					pc.Phases = append(pc.Phases, PhaseSideBySide{Phase: ph.Phase})
				}
				if isNew {
					pc.Phases[j].NewSeconds = ph.Seconds
				} else {
					pc.Phases[j].OldSeconds = ph.Seconds
				}
			}
		}
	}
	add(old, false)
	add(nw, true)
	for i := range out {
		ps := out[i].Phases
		sort.Slice(ps, func(a, b int) bool { return phaseRank(ps[a].Phase) < phaseRank(ps[b].Phase) })
		for j := range ps {
			ps[j].DeltaSeconds = seconds(int64((ps[j].NewSeconds - ps[j].OldSeconds) * 1e9))
		}
		if ps == nil {
			out[i].Phases = []PhaseSideBySide{}
		}
	}
	if out == nil {
		out = []PhaseComparison{}
	}
	return out
}

func phaseRank(name string) int {
	for p := range numPhases {
		if health.Phase(p).String() == name {
			return p
		}
	}
	return numPhases
}

// WriteJSON writes the comparison as indented JSON.
func (c *Comparison) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteTable writes the comparison for people.
func (c *Comparison) WriteTable(w io.Writer) error {
	bw := &textout.Writer{W: w}
	p := bw.Printf
	l := c.Log
	p("OLD %s\nNEW %s\n", c.Old, c.New)
	p("Log: %d lines, %d attempts replayed, %d requests", l.Lines, l.Attempts, l.Requests)
	if l.From != "" {
		p(", %s .. %s", l.From, l.To)
	}
	p("\n")
	if c.NewLog != nil {
		p("  NEW read it differently: %d attempts replayed, %d requests; skipped %d malformed, %d unknown channel/model, %d out of order\n",
			c.NewLog.Attempts, c.NewLog.Requests, c.NewLog.Malformed, c.NewLog.UnknownChannel, c.NewLog.OutOfOrder)
	}

	p("\nFailed requests, with each policy's failover:\n")
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  model\trequests\tOLD failed\tNEW failed\tchange\t\n")
	for _, m := range c.Models {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", m.Model, requestsOf(m), failedOf(m.Old), failedOf(m.New), failedDelta(m))
	}
	tw.Flush()
	f := c.Failed
	p("  fail under both %d, only under OLD %d, only under NEW %d", f.Both, f.OnlyOld, f.OnlyNew)
	if f.NotCompared > 0 {
		p("; %d more fail on a model only one policy routes (not compared)", f.NotCompared)
	}
	p("\n")
	for _, side := range []struct {
		name string
		n    int
		ex   []FailedRequest
	}{{"NEW", f.OnlyNew, f.OnlyNewExamples}, {"OLD", f.OnlyOld, f.OnlyOldExamples}} {
		if side.n == 0 {
			continue
		}
		more := ""
		if len(side.ex) < side.n {
			more = fmt.Sprintf(", the first %d", len(side.ex))
		}
		p("  fail only under %s (%d%s):\n", side.name, side.n, more)
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		for _, r := range side.ex {
			id := r.RequestID
			if id == "" {
				id = "(no requestId)"
			}
			assumed := ""
			if r.Assumed {
				assumed = "\tassumed attempt"
			}
			fmt.Fprintf(tw, "    %s\tline %d\t%s\t%s\tfirst on %s\t%d attempt(s)%s\n", id, r.Line, r.At, r.Model, r.FirstChannel, r.Attempts, assumed)
		}
		tw.Flush()
	}

	e := c.Ejection
	p("\nEjections: OLD %d, NEW %d; in both %d, gained %d (NEW only), lost %d (OLD only)\n", e.Old, e.New, e.Both, e.Gained, e.Lost)
	if len(c.Ejections) > 0 {
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		for _, ch := range c.Ejections {
			switch ch.Change {
			case "both":
				fmt.Fprintf(tw, "  both\t%s × %s\tOLD %s\t%s\tout %s\tNEW %s (%+gs)\t%s\tout %s\n", ch.Channel, ch.Model,
					ch.Old.At, ch.Old.Reason, secs(ch.Old.OutSeconds), ch.New.At, ch.ShiftSeconds, ch.New.Reason, secs(ch.New.OutSeconds))
			case "lost":
				fmt.Fprintf(tw, "  lost\t%s × %s\tOLD %s\t%s\tout %s\t%s\n", ch.Channel, ch.Model, ch.Old.At, ch.Old.Reason, secs(ch.Old.OutSeconds), ch.Old.Message)
			case "gained":
				fmt.Fprintf(tw, "  gained\t%s × %s\tNEW %s\t%s\tout %s\t%s\n", ch.Channel, ch.Model, ch.New.At, ch.New.Reason, secs(ch.New.OutSeconds), ch.New.Message)
			}
		}
		tw.Flush()
	}

	p("\nTime in each phase:\n")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  channel × model\tphase\tOLD\tNEW\tchange\t\n")
	for _, pc := range c.Phases {
		for i, ph := range pc.Phases {
			name := ""
			if i == 0 {
				name = pc.Channel + " × " + pc.Model
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", name, ph.Phase, secs(ph.OldSeconds), secs(ph.NewSeconds), signed(ph.DeltaSeconds))
		}
	}
	tw.Flush()

	if ic := c.Incidents; ic != nil {
		p("\nIncidents:\n")
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  \tincidents\tdetected\tmissed\tfalse ejections\tdelay p50\tdelay max\t\n")
		for _, s := range []struct {
			name string
			t    IncidentTotals
		}{{"OLD", ic.Old}, {"NEW", ic.New}} {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", s.name, s.t.Total, s.t.Detected, s.t.Missed, s.t.FalseEjections, secs(s.t.DelayP50), secs(s.t.DelayMax))
		}
		tw.Flush()
	}
	p("\n%s\n", c.Verdict)
	return bw.Err
}

func requestsOf(m ModelComparison) string {
	switch {
	case m.Old != nil && m.New != nil && m.Old.Requests != m.New.Requests:
		return fmt.Sprintf("%d / %d", m.Old.Requests, m.New.Requests)
	case m.Old != nil:
		return fmt.Sprint(m.Old.Requests)
	case m.New != nil:
		return fmt.Sprint(m.New.Requests)
	}
	return "0"
}

func failedOf(q *RequestReport) string {
	if q == nil {
		return "not routed"
	}
	return fmt.Sprintf("%d (%.3f%%)", q.FailedWithPolicy, q.FailedWithPolicyPercent)
}

func failedDelta(m ModelComparison) string {
	if m.Old == nil || m.New == nil {
		return "n/a"
	}
	return fmt.Sprintf("%+d", m.New.FailedWithPolicy-m.Old.FailedWithPolicy)
}

func signed(s float64) string {
	if s == 0 {
		return "0s"
	}
	if s > 0 {
		return "+" + secs(s)
	}
	return "-" + secs(-s)
}
