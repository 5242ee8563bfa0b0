// Package simulate reproduces the availability argument of the design notes with the real health
// engine: a month of synthetic traffic for one model on N independent channels whose outages follow
// a seeded random process, routed with the proxy's own failover planner (internal/failover) over
// the engine's Select.
//
// It is a discrete-event simulation on a virtual clock: nothing sleeps and nothing reads the wall
// clock, so the same Config gives the same Result, byte for byte. See docs/replay.md for the
// outage process, the traffic and the failover model.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Config describes the simulated world. The zero value of a field means its default.
type Config struct {
	// Channels lists the channel counts to compare (default 1, 2, 3). Channel i is the same in
	// every run: its outages do not depend on how many channels there are.
	Channels []int
	// Duration of the simulated period (default 30 days).
	Duration time.Duration
	// Rate of client requests per second, Poisson arrivals (default 1).
	Rate float64
	// UpMean is the mean time between the end of one outage and the start of the next,
	// exponentially distributed (default 12h).
	UpMean time.Duration
	// OutageMean and OutageSigma shape the log-normal outage duration (default 22m and 1.0:
	// median 13m, p95 68m; sigma 0 makes every outage OutageMean long). With the defaults a
	// channel is down 22/(720+22) = 2.96% of the time.
	OutageMean  time.Duration
	OutageSigma float64
	// HangShare of outages leave requests hanging until the first-byte timeout; the others answer
	// 503 at once (default 0.3).
	HangShare float64
	// Noise is the chance that a healthy channel fails one attempt anyway (default 0.001).
	// OutageSigma, HangShare and Noise are used as given, zero included: start from DefaultConfig.
	Noise float64
	// Timeout is what a hanging attempt costs before it counts as a timeout (default 10s, the
	// channel's default first-byte timeout).
	Timeout time.Duration
	// Scenario is the RoutingPolicy scenario whose settings the engine runs (default chat).
	Scenario string
	// MaxAttempts per client request (default 3, the policy default).
	MaxAttempts int
	// Seed of every random draw (DefaultConfig: 1).
	Seed uint64
	// RolloutPercent is the simulated policy's spec.rollout.percent (default 100): that share of
	// the requests, chosen as the proxy chooses (failover.ChooseCohort of the request id), get
	// the policy's failover and ejection; the rest walk the channels in order, ejections ignored.
	RolloutPercent int
	// Replicas is the number of proxy replicas (default 1); each request goes to one of them at
	// random, and each has its own health engine. With more than one, every channel count is run
	// once per Fleet mode.
	Replicas int
	// Fleet lists the modes to compare when Replicas > 1 (default local, shared): "local", each
	// replica judges alone; "shared", the replicas exchange evidence and verdicts through one
	// health.FleetBoard every FleetSyncInterval of simulated time.
	Fleet []string
	// FleetSyncInterval is how often the shared replicas exchange (default 1s, --fleet-sync-interval).
	FleetSyncInterval time.Duration
}

// Fleet modes of Config.Fleet.
const (
	FleetLocal  = "local"
	FleetShared = "shared"
)

// Defaults of Config.
const (
	DefaultDuration    = 30 * 24 * time.Hour
	DefaultRate        = 1.0
	DefaultUpMean      = 12 * time.Hour
	DefaultOutageMean  = 22 * time.Minute
	DefaultOutageSigma = 1.0
	DefaultHangShare   = 0.3
	DefaultNoise       = 0.001
	DefaultTimeout     = 10 * time.Second
	DefaultMaxAttempts = 3
)

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Channels: []int{1, 2, 3}, Duration: DefaultDuration, Rate: DefaultRate, UpMean: DefaultUpMean,
		OutageMean: DefaultOutageMean, OutageSigma: DefaultOutageSigma, HangShare: DefaultHangShare, Noise: DefaultNoise,
		Timeout: DefaultTimeout, Scenario: "chat", MaxAttempts: DefaultMaxAttempts, Seed: 1}
}

// defaults fills the fields whose zero value cannot be meant (OutageSigma, HangShare, Noise and
// Seed may be 0) and validates the result.
func (c *Config) defaults() error {
	d := DefaultConfig()
	if len(c.Channels) == 0 {
		c.Channels = d.Channels
	}
	for _, n := range c.Channels {
		if n < 1 || n > 16 {
			return fmt.Errorf("channel counts must be 1-16, got %d", n)
		}
	}
	for _, f := range []struct{ v, def *time.Duration }{{&c.Duration, &d.Duration}, {&c.UpMean, &d.UpMean},
		{&c.OutageMean, &d.OutageMean}, {&c.Timeout, &d.Timeout}} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if c.Rate == 0 {
		c.Rate = d.Rate
	}
	if c.Scenario == "" {
		c.Scenario = d.Scenario
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.RolloutPercent == 0 {
		c.RolloutPercent = 100
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if len(c.Fleet) == 0 {
		c.Fleet = []string{FleetLocal, FleetShared}
	}
	if c.FleetSyncInterval == 0 {
		c.FleetSyncInterval = time.Second
	}
	for _, m := range c.Fleet {
		if m != FleetLocal && m != FleetShared {
			return fmt.Errorf("fleet mode must be local or shared, got %q", m)
		}
	}
	switch {
	case c.Replicas < 1 || c.Replicas > 1000:
		return fmt.Errorf("replicas must be 1-1000, got %d", c.Replicas)
	case c.FleetSyncInterval < 100*time.Millisecond || c.FleetSyncInterval > time.Minute:
		return fmt.Errorf("fleet sync interval must be between 100ms and 1m, got %s", c.FleetSyncInterval)
	case c.Replicas > 1 && c.RolloutPercent < 100:
		return errors.New("a rollout percent below 100 is simulated with one replica only")
	}
	switch {
	case c.Duration < time.Minute || c.Duration > 366*24*time.Hour:
		return errors.New("duration must be between 1m and 366 days")
	case c.Rate <= 0 || c.Rate > 100:
		return errors.New("rate must be in (0, 100] requests/s")
	case float64(c.Duration/time.Second)*c.Rate > 50e6:
		return errors.New("duration × rate is over 50 million requests; lower one of them")
	case c.UpMean < time.Second || c.OutageMean < time.Second:
		return errors.New("up and outage means must be at least 1s")
	case c.OutageSigma < 0 || c.OutageSigma > 3:
		return errors.New("outage sigma must be in [0, 3]")
	case c.HangShare < 0 || c.HangShare > 1 || c.Noise < 0 || c.Noise >= 1:
		return errors.New("hang share must be in [0, 1] and noise in [0, 1)")
	case c.Timeout <= 0 || c.MaxAttempts < 1 || c.MaxAttempts > 10:
		return errors.New("timeout must be positive and max attempts 1-10")
	case c.Scenario != "chat" && c.Scenario != "batch":
		return fmt.Errorf("scenario must be chat or batch, got %q", c.Scenario)
	case c.RolloutPercent < 1 || c.RolloutPercent > 100:
		return fmt.Errorf("rollout percent must be 1-100, got %d", c.RolloutPercent)
	}
	return nil
}

// Result is one run: N channels for the whole period.
type Result struct {
	Channels int `json:"channels"`
	Requests int `json:"requests"`
	Failed   int `json:"failed"`
	// AvailabilityPercent is the share of client requests answered (with failover).
	AvailabilityPercent float64 `json:"availabilityPercent"`
	// DowntimePerMonth is (1 - availability) × 30 days.
	DowntimePerMonth time.Duration `json:"downtimePerMonthNs"`
	// Outages counts the outages of the run's channels; Ejections the engine's ejections.
	Outages   int `json:"outages"`
	Ejections int `json:"ejections"`
	// FailedOver counts requests answered by another channel after a failed attempt;
	// FailoverP50/P95 is the time such a request took from arrival to answer.
	FailedOver  int           `json:"failedOver"`
	FailoverP50 time.Duration `json:"failoverP50Ns"`
	FailoverP95 time.Duration `json:"failoverP95Ns"`
	// MoveP50/P95: from the start of an outage of the channel taking the first attempts until
	// the first request that Select sends elsewhere first (requests of the policy's cohort: the
	// listed cohort never moves). Outages that ended before that (too short to notice) are
	// counted in EndedBeforeMove. Not measured with one channel.
	MoveP50         time.Duration `json:"moveP50Ns"`
	MoveP95         time.Duration `json:"moveP95Ns"`
	EndedBeforeMove int           `json:"endedBeforeMove"`
	// Cohorts splits Requests and Failed by rollout cohort when RolloutPercent < 100; nil
	// otherwise (every request is the policy's).
	Cohorts *Cohorts `json:"cohorts,omitempty"`
	// The figures of a run with Replicas > 1 (nil otherwise).
	Fleet *FleetFigures `json:"fleet,omitempty"`
}

// FleetFigures are the figures of one fleet mode: N replicas judging alone or sharing evidence.
type FleetFigures struct {
	Replicas int    `json:"replicas"`
	Mode     string `json:"mode"`
	// BrokenAttempts counts the attempts (not probes) that failed on a channel in an outage.
	BrokenAttempts int `json:"brokenAttempts"`
	// Probes counts the probes sent, by every replica.
	Probes int `json:"probes"`
	// MoveP50 and MoveP90: for each outage of the channel that took the first attempts when it
	// began, from its start to the last request any replica still sent to it first during the
	// outage (not counting panic routing: with every channel out there is nowhere to move to). Outages in which such requests kept coming until their last 5 s are counted in
	// NotMoved instead. The per-replica "first request elsewhere" of one replica is no measure
	// for a fleet: at 200 replicas one replica sees a request every few minutes.
	MoveP50  time.Duration `json:"moveP50Ns"`
	MoveP90  time.Duration `json:"moveP90Ns"`
	NotMoved int           `json:"notMoved"`
}

// Cohorts are the figures of each rollout cohort (spec.rollout.percent): Policy, the requests
// that get the policy's failover and ejection; Listed, those that walk the channels in order.
type Cohorts struct {
	Policy CohortFigures `json:"policy"`
	Listed CohortFigures `json:"listed"`
}

// CohortFigures are one cohort's requests, how many failed, and the share answered.
type CohortFigures struct {
	Requests            int     `json:"requests"`
	Failed              int     `json:"failed"`
	AvailabilityPercent float64 `json:"availabilityPercent"`
}

// Run simulates every channel count of cfg (in parallel, each on its own engines) and returns
// the results in cfg.Channels order; with Replicas > 1, one result per channel count and Fleet
// mode, in that order.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	maxN := slices.Max(cfg.Channels)
	outages := make([][]outage, maxN)
	for i := range outages {
		outages[i] = outagesOf(&cfg, i)
	}
	type job struct {
		channels int
		mode     string // "" with one replica
	}
	var jobs []job
	for _, n := range cfg.Channels {
		if cfg.Replicas == 1 {
			jobs = append(jobs, job{channels: n})
			continue
		}
		for _, m := range cfg.Fleet {
			jobs = append(jobs, job{channels: n, mode: m})
		}
	}
	results := make([]Result, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = runOne(ctx, &cfg, outages[:j.channels], j.mode)
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// ExpectedSingle is the long-run availability of one channel under cfg's outage process:
// 1 - OutageMean/(UpMean+OutageMean), before noise.
func ExpectedSingle(cfg Config) float64 {
	return 100 * float64(cfg.UpMean) / float64(cfg.UpMean+cfg.OutageMean)
}

// outage is one stretch [from, to) during which a channel fails every attempt.
type outage struct {
	from, to int64
	hang     bool
}

// outagesOf draws channel i's outages: an alternating renewal process starting up, with
// exponential up times and log-normal outage durations, from its own random stream.
func outagesOf(cfg *Config, i int) []outage {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1))
	sigma := cfg.OutageSigma
	mu := math.Log(float64(cfg.OutageMean)) - sigma*sigma/2
	var out []outage
	t := int64(0)
	for t < int64(cfg.Duration) {
		t += int64(rng.ExpFloat64() * float64(cfg.UpMean))
		d := int64(math.Exp(mu + sigma*rng.NormFloat64()))
		hang := rng.Float64() < cfg.HangShare
		if t >= int64(cfg.Duration) {
			break
		}
		out = append(out, outage{from: t, to: min(t+max(d, int64(time.Second)), int64(cfg.Duration)), hang: hang})
		t += d
	}
	return out
}

// epoch is the simulated month's start; any fixed instant would do.
var epoch = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func at(t int64) time.Time { return time.Unix(0, epoch+t).UTC() }

const (
	evArrival = iota
	evAttemptEnd
	evProbeTick
	evProbeEnd
	evRetry
	evFleetSync
)

type event struct {
	t    int64
	seq  uint64
	kind uint8
	ch   int8
	req  int32 // the request; for evProbeEnd, the replica
	o    health.Outcome
	lat  time.Duration
}

type req struct {
	arrival int64
	first   int8  // the channel of the first attempt, -1 before it
	replica int32 // the replica serving it
	plan    failover.Plan
}

// routes is the simulated policy as the planner sees it: one model on N channels, each its own
// failure domain (their outages are independent), with the policy defaults of a RoutingPolicy
// that sets only maxAttempts.
type routes struct {
	model    failover.Model
	channels map[string]*routing.Channel
}

func (r *routes) Model(name string) *failover.Model {
	if name == r.model.Name {
		return &r.model
	}
	return nil
}

func (r *routes) Channel(id string) *routing.Channel { return r.channels[id] }

type sim struct {
	cfg     *Config
	outages [][]outage
	oi      []int            // per channel: index of the first outage that may still matter
	engs    []*health.Engine // one per replica
	evSeqs  []uint64         // per replica: the journal read so far
	keys    []health.Key
	routes  *routes
	rng     *rand.Rand
	heap    []event
	seq     uint64
	reqs    []*req
	free    []int32
	due     []health.Key
	set     health.Settings
	fl      *fleetSim // nil with one replica

	res        Result
	failover   []time.Duration
	moved      []time.Duration
	waiting    []int // per channel: outage index awaiting its ejection, -1 none
	lastOutage []int // per channel: the latest outage noticed, -1 none
	first      int   // the first choice of the latest request
	idBuf      []byte
}

func runOne(ctx context.Context, cfg *Config, outages [][]outage, mode string) (Result, error) {
	n := len(outages)
	replicas := 1
	if mode != "" {
		replicas = cfg.Replicas
	}
	s := &sim{cfg: cfg, outages: outages, oi: make([]int, n), engs: make([]*health.Engine, replicas), evSeqs: make([]uint64, replicas),
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x7a11c+uint64(n))), waiting: make([]int, n),
		lastOutage: make([]int, n)}
	set := health.DefaultSettings(cfg.Scenario)
	s.set = set
	policy := routing.Policy{Name: "simulate", Models: []string{"gpt-4o"}, Strategy: health.StrategyHealthScore.String(),
		Scenario: cfg.Scenario, Settings: set, PanicRouting: true,
		Retry: routing.Retry{MaxAttempts: cfg.MaxAttempts, BudgetPercent: routing.DefaultBudgetPercent,
			BackoffBase: routing.DefaultBackoffBase, BackoffMax: routing.DefaultBackoffMax}}
	if cfg.RolloutPercent < 100 {
		policy.Rollout = &routing.Rollout{Percent: cfg.RolloutPercent}
		s.res.Cohorts = &Cohorts{}
	}
	table := &routing.Table{Policies: []routing.Policy{policy}, Channels: make([]routing.Channel, n)}
	for i := range n {
		id := fmt.Sprintf("channel-%d", i+1)
		table.Channels[i] = routing.Channel{Name: id, Provider: "openai", Weight: 100,
			Models:   []routing.ChannelModel{{Name: "gpt-4o", Upstream: "gpt-4o"}},
			Timeouts: routing.Timeouts{Request: routing.DefaultRequestTimeout, FallbackRequest: routing.DefaultFallbackTimeout, FirstByte: cfg.Timeout, StreamIdle: routing.DefaultStreamIdle},
			Domain:   routing.FailureDomain{Region: id}}
		table.Policies[0].Channels = append(table.Policies[0].Channels, routing.PolicyChannel{Channel: id, Weight: 100})
	}
	// The proxy's routes and health targets, from the simulated table.
	built := failover.BuildRoutes(failover.RouteInputs{Table: table})
	s.routes = &routes{model: built.Models[0], channels: map[string]*routing.Channel{}}
	targets := built.Targets
	for i := range n {
		ch := &table.Channels[i]
		s.keys = append(s.keys, targets[i].Key)
		s.routes.channels[ch.ID()] = ch
		s.waiting[i], s.lastOutage[i] = -1, -1
		s.res.Outages += len(outages[i])
	}
	s.res.Channels = n
	for i := range s.engs {
		s.engs[i] = health.NewEngine(4096)
		s.engs[i].Configure(at(0), targets)
	}
	if mode != "" {
		s.fl = newFleetSim(s, mode)
		s.res.Fleet = &FleetFigures{Replicas: replicas, Mode: mode}
		if mode == FleetShared {
			s.push(event{t: int64(cfg.FleetSyncInterval), kind: evFleetSync})
		}
	}
	s.push(event{t: s.interarrival(), kind: evArrival})
	s.push(event{t: 0, kind: evProbeTick})
	end := int64(cfg.Duration)
	for steps := 0; len(s.heap) > 0; steps++ {
		if steps&0xfff == 0 { // often enough that an interrupt stops a 200-replica run within a second
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
		e := s.pop()
		switch e.kind {
		case evArrival:
			s.arrive(e.t)
			if next := e.t + s.interarrival(); next < end {
				s.push(event{t: next, kind: evArrival})
			}
		case evAttemptEnd:
			s.attemptEnd(e)
		case evProbeTick:
			s.probe(e.t)
			if e.t+int64(time.Second) < end {
				s.push(event{t: e.t + int64(time.Second), kind: evProbeTick})
			}
		case evRetry:
			s.step(e.req, e.t)
		case evProbeEnd:
			s.engs[e.req].Observe(s.keys[e.ch], health.Observation{At: at(e.t), Outcome: e.o, Latency: e.lat, Probe: true})
			s.observed(int(e.req), e.o, e.lat)
		case evFleetSync:
			s.fl.sync(e.t)
			if next := e.t + int64(cfg.FleetSyncInterval); next < end {
				s.push(event{t: next, kind: evFleetSync})
			}
		}
		s.drain(e.t)
	}
	s.finish()
	return s.res, nil
}

func (s *sim) interarrival() int64 {
	return max(1, int64(s.rng.ExpFloat64()/s.cfg.Rate*float64(time.Second)))
}

// down reports whether channel c is in an outage at t, and whether that outage hangs. Time only
// moves forward, so each channel keeps a cursor into its outage list.
func (s *sim) down(c int, t int64) (bool, bool, int) {
	os := s.outages[c]
	i := s.oi[c]
	for i < len(os) && os[i].to <= t {
		i++
	}
	s.oi[c] = i
	if i < len(os) && os[i].from <= t {
		return true, os[i].hang, i
	}
	return false, false, -1
}

// outcome draws what one attempt started at t on channel c gets, and how long it takes.
func (s *sim) outcome(c int, t int64) (health.Outcome, time.Duration) {
	if d, hang, _ := s.down(c, t); d {
		if hang {
			return health.OutcomeTimeout, s.cfg.Timeout
		}
		return health.OutcomeServerError, 200 * time.Millisecond
	}
	if s.rng.Float64() < s.cfg.Noise {
		return health.OutcomeServerError, 200 * time.Millisecond
	}
	// Healthy latency: log-normal around 1 s (p95 about 2.3 s).
	return health.OutcomeSuccess, time.Duration(math.Exp(0.5*s.rng.NormFloat64()) * float64(time.Second))
}

func (s *sim) arrive(t int64) {
	s.res.Requests++
	var id int32
	if n := len(s.free); n > 0 {
		id, s.free = s.free[n-1], s.free[:n-1]
	} else {
		id = int32(len(s.reqs))
		s.reqs = append(s.reqs, &req{})
	}
	r := s.reqs[id]
	r.arrival, r.first, r.replica = t, -1, 0
	if len(s.engs) > 1 {
		r.replica = int32(s.rng.IntN(len(s.engs)))
	}
	r.plan.Start(s.routes, s.engs[r.replica], s.rng, at(t), "gpt-4o")
	if pol := s.routes.model.Policy; pol.Rollout != nil {
		// The proxy hashes the request id: the simulated requests' ids are their numbers.
		s.idBuf = strconv.AppendInt(append(s.idBuf[:0], "sim-"...), int64(s.res.Requests), 10)
		r.plan.SetCohort(failover.ChooseCohort(pol, string(s.idBuf)))
	}
	s.step(id, t)
}

func (s *sim) index(channel string) int {
	for i, k := range s.keys {
		if k.Channel == channel {
			return i
		}
	}
	// Unreachable: every channel name the simulation routes comes from s.keys itself.
	panic("unknown channel " + channel)
}

// step asks the request's plan what to do at t, as the proxy does after each attempt: start an
// attempt, wait (a back-off: evRetry), or end the request.
func (s *sim) step(id int32, t int64) {
	r := s.reqs[id]
	st := r.plan.Next(at(t))
	switch st.Action {
	case failover.ActionTry:
		c := s.index(st.Channel.ID())
		if r.first < 0 {
			r.first = int8(c)
			switch {
			case s.fl != nil:
				s.fl.firstChoice(c, t, st.Panic)
			case r.plan.Cohort() == failover.CohortPolicy: // the listed cohort never moves off a channel
				s.firstChoice(c, t)
			}
		}
		if s.fl != nil {
			if d, _, _ := s.down(c, t); d {
				s.res.Fleet.BrokenAttempts++
			}
		}
		o, lat := s.outcome(c, t)
		s.push(event{t: t + int64(lat), kind: evAttemptEnd, ch: int8(c), req: id, o: o, lat: lat})
	case failover.ActionWait:
		s.push(event{t: t + int64(st.Wait), kind: evRetry, req: id})
	default:
		if st.Stop == failover.StopAnswered {
			if c := s.index(st.LastChannel); c != int(r.first) {
				s.res.FailedOver++
				s.failover = append(s.failover, time.Duration(t-r.arrival))
			}
		} else {
			s.res.Failed++
		}
		if co := s.res.Cohorts; co != nil {
			f := &co.Policy
			if r.plan.Cohort() == failover.CohortListed {
				f = &co.Listed
			}
			f.Requests++
			if st.Stop != failover.StopAnswered {
				f.Failed++
			}
		}
		s.free = append(s.free, id)
	}
}

// firstChoice notes the channel a request tried first: the end of a wait for traffic to move
// off a channel in an outage.
func (s *sim) firstChoice(c int, t int64) {
	s.first = c
	for ch, w := range s.waiting {
		if w >= 0 && ch != s.first {
			s.moved = append(s.moved, time.Duration(t-s.outages[ch][w].from))
			s.waiting[ch] = -1
		}
	}
}

// attemptEnd reports the attempt to the engine and to the request's plan, and takes its next step.
func (s *sim) attemptEnd(e event) {
	rep := int(s.reqs[e.req].replica)
	s.engs[rep].Observe(s.keys[e.ch], health.Observation{At: at(e.t), Outcome: e.o, Latency: e.lat})
	s.observed(rep, e.o, e.lat)
	s.reqs[e.req].plan.Observe(failover.Result{Outcome: e.o})
	s.step(e.req, e.t)
}

// observed follows what replica rep's engine just took: its journal (ejections) and, in a
// fleet, whether it has something to tell the others.
func (s *sim) observed(rep int, o health.Outcome, lat time.Duration) {
	if s.fl == nil {
		return // drain reads the one engine's journal after every event
	}
	s.journal(rep)
	if o != health.OutcomeSuccess || lat > s.set.LatencyP95 {
		s.fl.hot[rep] = true
	}
}

// probe hands out the probes due at t; each is answered like a real attempt started at t. In a
// fleet only the replicas with a key out of service are asked.
func (s *sim) probe(t int64) {
	for rep, e := range s.engs {
		if s.fl != nil && s.fl.out[rep] == 0 {
			continue
		}
		s.due = e.ProbesDue(at(t), s.due[:0])
		for _, k := range s.due {
			c := s.index(k.Channel)
			o, lat := s.outcome(c, t)
			if s.fl != nil {
				s.res.Fleet.Probes++
			}
			s.push(event{t: t + int64(lat), kind: evProbeEnd, ch: int8(c), req: int32(rep), o: o, lat: lat})
		}
		if s.fl != nil {
			s.journal(rep)
		}
	}
}

// journal counts the ejections in replica rep's journal since the last call, and in a fleet
// keeps track of how many of its keys are out of service (Ejected or Probing).
func (s *sim) journal(rep int) {
	for _, ev := range s.engs[rep].Events(s.evSeqs[rep]) {
		s.evSeqs[rep] = ev.Seq
		if ev.NewEjection() {
			s.res.Ejections++
		}
		if s.fl != nil {
			s.fl.phase(rep, ev)
		}
	}
}

// drain follows the journal (ejections) and notices the start of an outage on the channel that
// takes the first attempts; arrive then measures how long until traffic moved off it. drain runs
// after every event and a probe tick comes every second, so a start is noticed within a second
// (the delay is measured from its exact start).
func (s *sim) drain(now int64) {
	if s.fl != nil {
		s.fl.drain(now)
		return
	}
	for c := range s.keys {
		if d, _, i := s.down(c, now); d && i > s.lastOutage[c] {
			s.lastOutage[c] = i
			if c == s.first && len(s.keys) > 1 {
				s.waiting[c] = i
			}
		}
		if w := s.waiting[c]; w >= 0 {
			if d, _, i := s.down(c, now); !d || i != w {
				s.res.EndedBeforeMove++
				s.waiting[c] = -1
			}
		}
	}
	if s.fl == nil {
		s.journal(0)
	}
}

func (s *sim) finish() {
	if s.fl != nil {
		s.fl.finish()
	}
	for c := range s.keys {
		if s.waiting[c] >= 0 {
			s.res.EndedBeforeMove++
		}
	}
	s.res.AvailabilityPercent = 100 * (1 - float64(s.res.Failed)/float64(max(1, s.res.Requests)))
	s.res.DowntimePerMonth = time.Duration(float64(s.res.Failed) / float64(max(1, s.res.Requests)) * float64(30*24*time.Hour)).Round(time.Second)
	s.res.FailoverP50, s.res.FailoverP95 = quantile(s.failover, 50), quantile(s.failover, 95)
	s.res.MoveP50, s.res.MoveP95 = quantile(s.moved, 50), quantile(s.moved, 95)
	if co := s.res.Cohorts; co != nil {
		for _, f := range []*CohortFigures{&co.Policy, &co.Listed} {
			f.AvailabilityPercent = 100 * (1 - float64(f.Failed)/float64(max(1, f.Requests)))
		}
	}
}

func quantile(v []time.Duration, p int) time.Duration {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	rank := (len(v)*p + 99) / 100
	return v[max(rank, 1)-1].Round(time.Millisecond)
}

// ---- event queue: a binary min-heap by (t, seq) ----

func (s *sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.heap = append(s.heap, e)
	h := s.heap
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !before(&h[i], &h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func before(a, b *event) bool { return a.t < b.t || (a.t == b.t && a.seq < b.seq) }

func (s *sim) pop() event {
	h := s.heap
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && before(&h[l], &h[m]) {
			m = l
		}
		if l+1 < n && before(&h[l+1], &h[m]) {
			m = l + 1
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	s.heap = h
	return top
}
