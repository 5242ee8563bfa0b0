package fleet

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-io/switchyard/internal/health"
)

//go:embed script.lua
var scriptSource string

var syncScript = redis.NewScript(scriptSource)

// Bucket names one evidence counter: a time bucket of the reporter's choosing (the engine's
// window slot, say) and a figure ("requests", "failures", a latency bin). Buckets older than a
// report's Horizon leave the store, so the counts of a replica that stopped reporting fade out
// with its window.
type Bucket struct {
	At   int64
	Name string
}

func (b Bucket) field() string { return strconv.FormatInt(b.At, 10) + ":" + b.Name }

func parseField(f string) (Bucket, bool) {
	at, name, ok := strings.Cut(f, ":")
	if !ok {
		return Bucket{}, false
	}
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return Bucket{}, false
	}
	return Bucket{At: n, Name: name}, true
}

// Evidence is one key's deltas since this replica's last sync.
type Evidence struct {
	Key    string
	Deltas map[Bucket]int64
	// Horizon, when not 0, drops the key's buckets older than it (the window has moved past them).
	Horizon int64
	// Phase is the replica's phase of the key, counted in KeyView.Phases; empty: not reported.
	Phase string
}

// Proposal asks the store to hold a verdict for a key. With Prev empty it is set only when no
// verdict is held (the first replica to trip wins); otherwise only when the held one is still
// Prev (compare-and-set), and an empty Next then lifts it. The value is the engine's, opaque here.
type Proposal struct {
	Key        string
	Prev, Next string
	TTL        time.Duration
}

// RetryAfter is a 429's Retry-After heard by this replica, for the fleet.
type RetryAfter struct {
	Key string
	For time.Duration
}

// ClientUse is a GatewayClient's requests and tokens counted by this replica since its last sync.
type ClientUse struct {
	Client           string
	Requests, Tokens int64
}

// Report is what one replica sends in one sync.
type Report struct {
	Evidence   []Evidence
	Proposals  []Proposal
	Probes     []string // keys this replica wants (or keeps) the probe lease of
	Release    []string // keys whose lease this replica no longer needs
	RetryAfter []RetryAfter
	Clients    []ClientUse
	// ReadClients are the clients whose fleet totals to read (the configured ones with limits).
	ReadClients []string
	// Health is the engine's side of the exchange (health.Board); nil: none this sync.
	Health *HealthReport
}

// HealthReport is the engine's outbox and the verdicts it proposes, for the store's Board.
type HealthReport struct {
	Reports   []health.FleetReport
	Proposals []health.FleetVerdict
}

// View is what the store holds for the fleet after a sync.
type View struct {
	// Replicas is the number of replicas that synced within the liveness window (this one included).
	Replicas int
	// Evidence holds, for every key some replica reported recently, the other replicas' counts
	// (this replica's own are subtracted) and the phases reported.
	Evidence map[string]KeyView
	// Verdicts are the verdicts held, by key, with the time each has left.
	Verdicts map[string]Held
	// Leases names the owner of each lease this replica asked for ("" when none could be had).
	Leases map[string]string
	// RetryAfter is the time left of the fleet's latest Retry-After, by key.
	RetryAfter map[string]time.Duration
	// Clients are the fleet's totals of the clients read, this replica's included.
	Clients map[string]ClientTotals
	// Inputs are the engine's fleet inputs (health.Board.Exchange), when the report had Health.
	Inputs []health.FleetInput
}

// KeyView is the fleet's evidence of one key.
type KeyView struct {
	Others map[Bucket]int64
	Phases map[string]int
}

// Held is a verdict in the store.
type Held struct {
	Value string
	TTL   time.Duration
}

// ClientTotals are a client's requests and tokens over the last minute and the UTC day, fleet-wide.
type ClientTotals struct {
	MinuteRequests, MinuteTokens int64
	DayRequests, DayTokens       int64
}

// Settings are the store's timings.
type Settings struct {
	// Name is the fleet's name (--fleet-name): every key starts with "switchyard:NAME:".
	Name string
	// Replica is this replica's name (--replica); unique in the fleet.
	Replica string
	// EvidenceTTL is how long a key's counts stay without a report (the longest window, plus margin).
	EvidenceTTL time.Duration
	// Live is how long a replica counts as present after its last sync.
	Live time.Duration
	// Lease is how long a probe lease lasts without renewal.
	Lease time.Duration
	// Phases are the phase names KeyView.Phases may count.
	Phases []string
	// Interval is the sync interval (the Board's leases and staleness count in it).
	Interval time.Duration
}

// Store is the fleet's state in one Redis or Valkey server.
type Store struct {
	rdb    *redis.Client
	prefix string
	set    Settings
	board  *Board
}

// CallTimeout bounds every call to the store: a slow store makes a sync fail, never wait.
const CallTimeout = 500 * time.Millisecond

// NewStore connects (lazily) to the endpoint. The client keeps one or two connections: one sync
// per interval needs no pool.
func NewStore(ep Endpoint, set Settings) *Store {
	opt := &redis.Options{
		Addr: ep.Addr, Username: ep.Username, Password: ep.Password, DB: ep.DB,
		DialTimeout: CallTimeout, ReadTimeout: CallTimeout, WriteTimeout: CallTimeout,
		PoolSize: 2, MaxRetries: -1, // a failed sync is retried by the next one, not here
		ContextTimeoutEnabled: true,
		DisableIdentity:       true, // no CLIENT SETINFO: older servers and Valkey log it as unknown
	}
	if ep.TLS {
		host := ep.Addr
		if h, _, ok := strings.Cut(ep.Addr, ":"); ok {
			host = h
		}
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	}
	return newStore(redis.NewClient(opt), set)
}

func newStore(rdb *redis.Client, set Settings) *Store {
	if set.EvidenceTTL <= 0 {
		set.EvidenceTTL = 6 * time.Minute
	}
	if set.Live <= 0 {
		set.Live = 5 * time.Second
	}
	if set.Lease <= 0 {
		set.Lease = 3 * time.Second
	}
	return &Store{rdb: rdb, prefix: "switchyard:" + set.Name + ":", set: set, board: NewBoard(rdb, set.Name, set.Interval)}
}

// Close closes the connections.
func (s *Store) Close() error { return s.rdb.Close() }

type wireEvidence struct {
	K  string           `json:"k"`
	C  map[string]int64 `json:"c,omitempty"`
	H  int64            `json:"h,omitempty"`
	Ph string           `json:"ph,omitempty"`
}

type wireProposal struct {
	K    string `json:"k"`
	Prev string `json:"prev"`
	Next string `json:"next"`
	TTL  int64  `json:"ttl"`
}

type wireRetry struct {
	K  string `json:"k"`
	Ms int64  `json:"ms"`
}

type wireUse struct {
	C string `json:"c"`
	S int64  `json:"s"`
	D string `json:"d"`
	R int64  `json:"r"`
	T int64  `json:"t"`
}

type wireRead struct {
	C string `json:"c"`
	S int64  `json:"s"`
	D string `json:"d"`
}

type wireReport struct {
	R    string         `json:"r"`
	TTL  int64          `json:"ttl"`
	Live int64          `json:"live"`
	LT   int64          `json:"lt"`
	Phs  []string       `json:"phs,omitempty"`
	Ev   []wireEvidence `json:"ev,omitempty"`
	VP   []wireProposal `json:"vp,omitempty"`
	Pr   []string       `json:"pr,omitempty"`
	Rel  []string       `json:"rel,omitempty"`
	RA   []wireRetry    `json:"ra,omitempty"`
	CU   []wireUse      `json:"cu,omitempty"`
	CR   []wireRead     `json:"cr,omitempty"`
}

// obj is a JSON object decoded into a map. Lua's cjson cannot tell an empty object from an
// empty array, and some encoders write "[]": both mean an empty map here.
type obj[T any] map[string]T

func (o *obj[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "[]" || string(b) == "null" {
		*o = nil
		return nil
	}
	return json.Unmarshal(b, (*map[string]T)(o))
}

type wireView struct {
	Rep int `json:"rep"`
	Ev  obj[struct {
		C  obj[float64] `json:"c"`
		Ph obj[int]     `json:"ph"`
	}] `json:"ev"`
	V obj[struct {
		V string  `json:"v"`
		T float64 `json:"t"`
	}] `json:"v"`
	L  obj[string]  `json:"l"`
	RA obj[float64] `json:"ra"`
	Cl obj[struct {
		MR float64 `json:"mr"`
		MT float64 `json:"mt"`
		DR float64 `json:"dr"`
		DT float64 `json:"dt"`
	}] `json:"cl"`
}

// Sync sends the report and reads the fleet's view in one round trip. now is this replica's
// clock; it dates the clients' usage (per second, per UTC day) only, the store's own times being
// the server's.
func (s *Store) Sync(ctx context.Context, now time.Time, r Report) (View, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	w := wireReport{R: s.set.Replica, TTL: s.set.EvidenceTTL.Milliseconds(), Live: s.set.Live.Milliseconds(),
		LT: s.set.Lease.Milliseconds(), Phs: s.set.Phases, Pr: r.Probes, Rel: r.Release}
	for _, e := range r.Evidence {
		we := wireEvidence{K: e.Key, H: e.Horizon, Ph: e.Phase}
		if len(e.Deltas) > 0 {
			we.C = make(map[string]int64, len(e.Deltas))
			for b, d := range e.Deltas {
				if d != 0 {
					we.C[b.field()] = d
				}
			}
		}
		w.Ev = append(w.Ev, we)
	}
	for _, p := range r.Proposals {
		w.VP = append(w.VP, wireProposal{K: p.Key, Prev: p.Prev, Next: p.Next, TTL: max(p.TTL.Milliseconds(), 1)})
	}
	for _, ra := range r.RetryAfter {
		w.RA = append(w.RA, wireRetry{K: ra.Key, Ms: ra.For.Milliseconds()})
	}
	sec, day := now.Unix(), now.UTC().Format(time.DateOnly)
	for _, c := range r.Clients {
		w.CU = append(w.CU, wireUse{C: c.Client, S: sec, D: day, R: c.Requests, T: c.Tokens})
	}
	for _, c := range r.ReadClients {
		w.CR = append(w.CR, wireRead{C: c, S: sec, D: day})
	}
	payload, err := json.Marshal(w)
	if err != nil {
		return View{}, err
	}
	var boardArgs []any
	if r.Health != nil {
		if boardArgs, err = s.board.args(now, s.set.Replica, r.Health.Reports, r.Health.Proposals); err != nil {
			return View{}, err
		}
	}
	raw, boardRaw, err := s.roundTrip(ctx, []any{s.prefix, payload}, boardArgs)
	if err != nil {
		return View{}, fmt.Errorf("fleet sync: %w", redactErr(err))
	}
	var wv wireView
	if err := json.Unmarshal([]byte(raw), &wv); err != nil {
		return View{}, fmt.Errorf("fleet sync: bad reply: %w", err)
	}
	v := View{Replicas: wv.Rep, Evidence: make(map[string]KeyView, len(wv.Ev)), Verdicts: make(map[string]Held, len(wv.V)),
		Leases: wv.L, RetryAfter: make(map[string]time.Duration, len(wv.RA)), Clients: make(map[string]ClientTotals, len(wv.Cl))}
	for k, e := range wv.Ev {
		kv := KeyView{Others: make(map[Bucket]int64, len(e.C)), Phases: e.Ph}
		for f, n := range e.C {
			if b, ok := parseField(f); ok {
				kv.Others[b] = int64(n)
			}
		}
		v.Evidence[k] = kv
	}
	for k, h := range wv.V {
		v.Verdicts[k] = Held{Value: h.V, TTL: time.Duration(h.T) * time.Millisecond}
	}
	for k, ms := range wv.RA {
		v.RetryAfter[k] = time.Duration(ms) * time.Millisecond
	}
	for c, t := range wv.Cl {
		v.Clients[c] = ClientTotals{MinuteRequests: int64(t.MR), MinuteTokens: int64(t.MT), DayRequests: int64(t.DR), DayTokens: int64(t.DT)}
	}
	if v.Leases == nil {
		v.Leases = map[string]string{}
	}
	if r.Health != nil {
		if v.Inputs, err = s.board.finish(now, s.set.Replica, r.Health.Reports, boardRaw); err != nil {
			return View{}, err
		}
	}
	return v, nil
}

// roundTrip runs the sync script and, with boardArgs, the board's, pipelined: one round trip.
// A server that has not cached the scripts (a restart, a failover) answers NOSCRIPT: they are
// loaded and the pipeline sent once more.
func (s *Store) roundTrip(ctx context.Context, syncArgs, boardArgs []any) (syncRaw, boardRaw string, err error) {
	for attempt := 0; ; attempt++ {
		var sc, bc *redis.Cmd
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			sc = syncScript.EvalSha(ctx, p, nil, syncArgs...)
			if boardArgs != nil {
				bc = boardScript.EvalSha(ctx, p, nil, boardArgs...)
			}
			return nil
		})
		if err != nil && attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := syncScript.Load(ctx, s.rdb).Err(); err != nil {
				return "", "", err
			}
			if err := boardScript.Load(ctx, s.rdb).Err(); err != nil {
				return "", "", err
			}
			continue
		}
		if err != nil {
			return "", "", err
		}
		if syncRaw, err = sc.Text(); err != nil {
			return "", "", err
		}
		if bc != nil {
			if boardRaw, err = bc.Text(); err != nil {
				return "", "", err
			}
		}
		return syncRaw, boardRaw, nil
	}
}

// redactErr keeps the store's error message but never an address with credentials; go-redis's
// errors carry none today, and this says so at the one place they leave the package.
func redactErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("the store did not answer in time")
	}
	return err
}
