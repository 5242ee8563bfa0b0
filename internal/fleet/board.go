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
	N       int             `json:"n"`
	Reports string          `json:"reports,omitempty"`
	EvK     []string        `json:"evk,omitempty"`
	Lease   []string        `json:"lease,omitempty"`
	RA      [][2]any        `json:"ra,omitempty"`
	Props   []boardProposal `json:"props,omitempty"`
}

type boardState struct {
	Reps   obj[string] `json:"reps"`
	Seen   obj[string] `json:"seen"`
	Prev   obj[string] `json:"prev"`
	Ev     obj[string] `json:"ev"`
	Leases obj[string] `json:"leases"`
	Retry  obj[string] `json:"retry"`
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
	x := boardExchange{N: len(reports)}
	if len(reports) > 0 {
		raw, err := json.Marshal(reports)
		if err != nil {
			return nil, err
		}
		x.Reports = string(raw)
	}
	for i := range reports {
		r := &reports[i]
		k := KeyString(r.Key)
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
	// In replica order: FleetTop's ties go to the first replica considered.
	reps := make([]string, 0, len(st.Reps))
	for r := range st.Reps {
		reps = append(reps, r)
	}
	slices.Sort(reps)
	for _, rep := range reps {
		blob := st.Reps[rep]
		var theirs []health.FleetReport
		if err := json.Unmarshal([]byte(blob), &theirs); err != nil {
			return nil, fmt.Errorf("fleet exchange: a replica's reports do not decode: %w", err)
		}
		for i := range theirs {
			r := &theirs[i]
			in := get(r.Key)
			in.Replicas++
			in.Others.Add(&r.Counts)
			in.Top.Consider(r)
			if r.Streak > 0 {
				in.Streak += r.Streak
				if in.StreakStart.IsZero() || r.StreakStart.Before(in.StreakStart) {
					in.StreakStart = r.StreakStart
				}
			}
			if r.LastSuccess.After(in.LastSuccess) {
				in.LastSuccess = r.LastSuccess
			}
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
		in.Complete = complete(st, KeyString(k))
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b health.FleetInput) int {
		return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Model, b.Model))
	})
	return out, nil
}

// complete: every replica has exchanged twice since the key's evidence appeared.
func complete(st *boardState, k string) bool {
	since, ok := st.Ev[k]
	if !ok {
		return false
	}
	s, _ := strconv.ParseInt(since, 10, 64)
	for rep := range st.Seen {
		p, _ := strconv.ParseInt(st.Prev[rep], 10, 64)
		if p <= s {
			return false
		}
	}
	return true
}

var _ health.Board = (*Board)(nil)
