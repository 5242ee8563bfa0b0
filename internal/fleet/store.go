package fleet

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-io/switchyard/internal/health"
)

//go:embed script.lua
var scriptSource string

var syncScript = redis.NewScript(scriptSource)

// Phase is this replica's phase of one key it reports, counted in View.Phases.
type Phase struct {
	Key   string
	Phase string
}

// ClientUse is a GatewayClient's requests and tokens counted by this replica since its last sync.
type ClientUse struct {
	Client           string
	Requests, Tokens int64
}

// Report is what one replica sends in one sync.
type Report struct {
	// Phases are this replica's phases of the keys it reports to the board.
	Phases  []Phase
	Clients []ClientUse
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
	// Phases counts, per key some replica reported within the liveness window, the replicas in
	// each phase (this one included). Replicas to which the key is quiet are not counted.
	Phases map[string]map[string]int
	// Clients are the fleet's totals of the clients read, this replica's included.
	Clients map[string]ClientTotals
	// Inputs are the engine's fleet inputs (health.Board.Exchange), when the report had Health.
	Inputs []health.FleetInput
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
	// Live is how long a replica counts as present after its last sync, and its phases with it.
	Live time.Duration
	// Phases are the phase names View.Phases may count.
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
		host, _, err := net.SplitHostPort(ep.Addr)
		if err != nil {
			host = ep.Addr
		}
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	}
	return newStore(redis.NewClient(opt), set)
}

func newStore(rdb *redis.Client, set Settings) *Store {
	if set.Live <= 0 {
		set.Live = 5 * time.Second
	}
	return &Store{rdb: rdb, prefix: "switchyard:" + set.Name + ":", set: set, board: NewBoard(rdb, set.Name, set.Interval)}
}

// Close closes the connections.
func (s *Store) Close() error { return s.rdb.Close() }

type wirePhase struct {
	K  string `json:"k"`
	Ph string `json:"ph"`
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
	R    string      `json:"r"`
	Live int64       `json:"live"`
	Phs  []string    `json:"phs,omitempty"`
	Ph   []wirePhase `json:"ph,omitempty"`
	CU   []wireUse   `json:"cu,omitempty"`
	CR   []wireRead  `json:"cr,omitempty"`
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
	Rep int           `json:"rep"`
	Ph  obj[obj[int]] `json:"ph"`
	Cl  obj[struct {
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
	w := wireReport{R: s.set.Replica, Live: s.set.Live.Milliseconds(), Phs: s.set.Phases}
	for _, ph := range r.Phases {
		if ph.Phase != "" {
			w.Ph = append(w.Ph, wirePhase{K: ph.Key, Ph: ph.Phase})
		}
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
	v := View{Replicas: wv.Rep, Phases: make(map[string]map[string]int, len(wv.Ph)), Clients: make(map[string]ClientTotals, len(wv.Cl))}
	for k, ph := range wv.Ph {
		v.Phases[k] = ph
	}
	for c, t := range wv.Cl {
		v.Clients[c] = ClientTotals{MinuteRequests: int64(t.MR), MinuteTokens: int64(t.MT), DayRequests: int64(t.DR), DayTokens: int64(t.DT)}
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
