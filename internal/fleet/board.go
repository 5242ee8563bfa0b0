package fleet

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-io/switchyard/internal/health"
)

//go:embed board.lua
var boardSource string

var boardScript = redis.NewScript(boardSource)

// Board is health.Board on Redis: the semantics of health.FleetBoard (TestStoreMatchesBoard
// plays both on one sequence), one script per exchange. Times are the caller's, to the
// millisecond, as FleetBoard's rules read them; the store's TTLs only collect what nobody renews.
type Board struct {
	rdb      *redis.Client
	prefix   string
	interval time.Duration
}

// NewBoard is the board of the fleet name on rdb, for replicas that exchange every interval.
func NewBoard(rdb *redis.Client, name string, interval time.Duration) *Board {
	if interval <= 0 {
		interval = DefaultSyncInterval
	}
	return &Board{rdb: rdb, prefix: "switchyard:" + name + ":h:", interval: interval}
}

// KeyString is a health.Key in the store: "CHANNEL|MODEL" (channel IDs are namespace/name and
// model names carry no "|" in the routing table's model list; a "|" in a model would only make
// its key share a field, never cross fleets).
func KeyString(k health.Key) string { return k.Channel + "|" + k.Model }

func ParseKey(s string) health.Key {
	c, m, _ := strings.Cut(s, "|")
	return health.Key{Channel: c, Model: m}
}

type boardProposal struct {
	K     string `json:"k"`
	Prev  uint64 `json:"prev"`
	Until int64  `json:"until"`
	Blob  string `json:"blob"`
}

type boardExchange struct {
	Reps  []boardRep      `json:"reps,omitempty"`
	EvK   []string        `json:"evk,omitempty"`
	Lease []string        `json:"lease,omitempty"`
	RA    [][2]any        `json:"ra,omitempty"`
	Props []boardProposal `json:"props,omitempty"`
}

// boardRep is one report as the script stores it: C is a boardEntry as JSON, kept as is in the
// key's hash of reports and returned when the replica is a top.
type boardRep struct {
	K string `json:"k"`
	C string `json:"c"`
}

// boardEntry is what the store keeps of one replica's report of one key: the figures its sums
// and tops are made of.
type boardEntry struct {
	Q  int                        `json:"q"`
	F  int                        `json:"f"`
	T  int                        `json:"t"`
	St int                        `json:"st"`
	Ev int                        `json:"ev"` // 1: the report has evidence (hasEvidence)
	Sl uint32                     `json:"sl"` // samples above LatencyP95
	Sa uint32                     `json:"sa"` // samples
	B  [health.LatencyBins]uint32 `json:"b"`
	SS int64                      `json:"ss"` // StreakStart, ms (0: none)
	LS int64                      `json:"ls"` // LastSuccess, ms (0: none)
}

func entryOf(r *health.FleetReport) boardEntry {
	e := boardEntry{Q: r.Counts.Requests, F: r.Counts.Failures, T: r.Counts.Timeouts, St: r.Streak,
		Sl: r.Counts.Slow(), Sa: r.Counts.Samples(), B: r.Counts.Latency, SS: ms(r.StreakStart), LS: ms(r.LastSuccess)}
	if hasEvidence(r) {
		e.Ev = 1
	}
	return e
}

// boardKey is the script's reply for one key: the sums of every replica's report (HGETALL of
// s:KEY, flat), the reports of the other replicas on top of each kind (boardEntry JSON), the
// longest other streak, the earliest other StreakStart and the latest other LastSuccess.
type boardKey struct {
	S   []string `json:"s"`
	TF  string   `json:"tf"`
	TT  string   `json:"tt"`
	TSl string   `json:"tsl"`
	TSt string   `json:"tst"`
	SS  string   `json:"ss"`
	LS  string   `json:"ls"`
}

type boardState struct {
	K      obj[boardKey] `json:"k"`
	C      obj[bool]     `json:"c"`
	Leases obj[string]   `json:"leases"`
	Retry  obj[string]   `json:"retry"`
	V      obj[struct {
		Blob string  `json:"blob"`
		Ver  float64 `json:"ver"`
		By   string  `json:"by"`
	}] `json:"v"`
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// hasEvidence is health's rule for FleetInput.Complete: a report with something a fleet rule counts.
func hasEvidence(r *health.FleetReport) bool {
	return r.Counts.Failures > 0 || r.Streak > 0 || r.Counts.Slow() > 0
}

// Exchange implements health.Board in one round trip, bounded by CallTimeout.
func (b *Board) Exchange(now time.Time, replica string, reports []health.FleetReport, proposals []health.FleetVerdict) ([]health.FleetInput, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	defer cancel()
	return b.exchange(ctx, now, replica, reports, proposals)
}

func (b *Board) exchange(ctx context.Context, now time.Time, replica string, reports []health.FleetReport, proposals []health.FleetVerdict) ([]health.FleetInput, error) {
	args, err := b.args(now, replica, reports, proposals)
	if err != nil {
		return nil, err
	}
	raw, err := boardScript.Run(ctx, b.rdb, nil, args...).Text()
	if err != nil {
		return nil, fmt.Errorf("fleet exchange: %w", redactErr(err))
	}
	return b.finish(now, replica, reports, raw)
}

// args are the script's arguments for one exchange.
func (b *Board) args(now time.Time, replica string, reports []health.FleetReport, proposals []health.FleetVerdict) ([]any, error) {
	var x boardExchange
	for i := range reports {
		r := &reports[i]
		k := KeyString(r.Key)
		c, err := json.Marshal(entryOf(r))
		if err != nil {
			return nil, err
		}
		x.Reps = append(x.Reps, boardRep{K: k, C: string(c)})
		if hasEvidence(r) {
			x.EvK = append(x.EvK, k)
		}
		if r.WantsProbeLease {
			x.Lease = append(x.Lease, k)
		}
		if !r.RetryAfterUntil.IsZero() {
			x.RA = append(x.RA, [2]any{k, ms(r.RetryAfterUntil)})
		}
	}
	for _, p := range proposals {
		p.By, p.Version = "", 0
		prev := p.Prev
		p.Prev = 0
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		x.Props = append(x.Props, boardProposal{K: KeyString(p.Key), Prev: prev, Until: ms(p.Until), Blob: string(raw)})
	}
	payload, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	return []any{b.prefix, ms(now), b.interval.Milliseconds(), replica, payload}, nil
}

// finish decodes the script's reply into the replica's inputs.
func (b *Board) finish(now time.Time, replica string, reports []health.FleetReport, raw string) ([]health.FleetInput, error) {
	var st boardState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return nil, fmt.Errorf("fleet exchange: bad reply: %w", err)
	}
	return b.inputs(now, replica, reports, &st)
}

// inputs builds replica's inputs from the board's state as FleetBoard.inputs does, in channel,
// model order.
func (b *Board) inputs(now time.Time, replica string, mine []health.FleetReport, st *boardState) ([]health.FleetInput, error) {
	byKey := map[health.Key]*health.FleetInput{}
	expires := now.Add(3 * b.interval)
	get := func(k health.Key) *health.FleetInput {
		in := byKey[k]
		if in == nil {
			in = &health.FleetInput{Key: k, Expires: expires}
			byKey[k] = in
		}
		return in
	}
	for i := range mine {
		get(mine[i].Key)
	}
	own := make(map[health.Key]*health.FleetReport, len(mine))
	for i := range mine {
		own[mine[i].Key] = &mine[i]
	}
	for ks, e := range st.K {
		k := ParseKey(ks)
		in := get(k)
		sums := map[string]int64{}
		for i := 0; i+1 < len(e.S); i += 2 {
			n, err := strconv.ParseInt(e.S[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("fleet exchange: a sum does not decode: %w", err)
			}
			sums[e.S[i]] = n
		}
		// The others' figures are every replica's sums less the caller's own report.
		var me boardEntry
		n := sums["n"]
		if r := own[k]; r != nil {
			me, n = entryOf(r), n-1
		}
		in.Replicas = int(n)
		in.Others.Requests = int(sums["q"]) - me.Q
		in.Others.Failures = int(sums["f"]) - me.F
		in.Others.Timeouts = int(sums["t"]) - me.T
		for i := range in.Others.Latency {
			in.Others.Latency[i] = uint32(sums["b"+strconv.Itoa(i+1)]) - me.B[i]
		}
		in.Streak = int(sums["st"]) - me.St
		if in.Streak > 0 {
			in.StreakStart = scoreTime(e.SS)
		}
		in.LastSuccess = scoreTime(e.LS)
		var top boardEntry
		if e.TF != "" {
			if err := json.Unmarshal([]byte(e.TF), &top); err != nil {
				return nil, fmt.Errorf("fleet exchange: a report does not decode: %w", err)
			}
			in.Top.FailingRequests, in.Top.Failures = top.Q, top.F
		}
		if e.TT != "" {
			if err := json.Unmarshal([]byte(e.TT), &top); err != nil {
				return nil, fmt.Errorf("fleet exchange: a report does not decode: %w", err)
			}
			in.Top.TimingRequests, in.Top.Timeouts = top.Q, top.T
		}
		if e.TSl != "" {
			if err := json.Unmarshal([]byte(e.TSl), &top); err != nil {
				return nil, fmt.Errorf("fleet exchange: a report does not decode: %w", err)
			}
			in.Top.Slow = top.B
		}
		if e.TSt != "" {
			f, err := strconv.ParseFloat(e.TSt, 64)
			if err != nil {
				return nil, fmt.Errorf("fleet exchange: a streak does not decode: %w", err)
			}
			in.Top.Streak = int(f)
		}
	}
	for k, v := range st.V {
		var fv health.FleetVerdict
		if err := json.Unmarshal([]byte(v.Blob), &fv); err != nil {
			return nil, fmt.Errorf("fleet exchange: a verdict does not decode: %w", err)
		}
		fv.Key, fv.By, fv.Version = ParseKey(k), v.By, uint64(v.Ver)
		get(fv.Key).Verdict = &fv
	}
	for k, l := range st.Leases {
		holder := l
		if i := strings.LastIndexByte(l, '|'); i >= 0 {
			holder = l[:i]
		}
		in := get(ParseKey(k))
		in.ProbeLeaseHeld, in.HoldsProbeLease = true, holder == replica
	}
	for k, t := range st.Retry {
		get(ParseKey(k)).RetryAfterUntil = fromMs(t)
	}
	out := make([]health.FleetInput, 0, len(byKey))
	for k, in := range byKey {
		in.Complete = st.C[KeyString(k)]
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b health.FleetInput) int {
		return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Model, b.Model))
	})
	return out, nil
}

// scoreTime reads a sorted-set score of milliseconds (Redis may write it as a float); "" or
// 0 is the zero time.
func scoreTime(s string) time.Time {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(f))
}

var _ health.Board = (*Board)(nil)
