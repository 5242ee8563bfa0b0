package fleet

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
)

// DefaultSyncInterval is --fleet-sync-interval's default.
const DefaultSyncInterval = time.Second

// JoinTimeout bounds JoinFleet: a replica that cannot reach the store serves on local evidence.
const JoinTimeout = 2 * time.Second

// Peer is the replica's side of an exchange (the proxy, driving its health engine and client
// limits). Its methods never block on I/O.
type Peer interface {
	// Report is what to send in this sync: the deltas since the last one.
	Report(now time.Time) Report
	// Adopt takes the fleet's view after a sync that worked.
	Adopt(now time.Time, v View)
	// Alone tells the replica the store is lost: it judges on its local evidence alone until the
	// next Adopt.
	Alone(now time.Time)
}

// Exchanger is one round trip with the store (Store; tests may put a failing one in front).
type Exchanger interface {
	Sync(ctx context.Context, now time.Time, r Report) (View, error)
}

// Syncer runs the exchange once per interval, off the request path.
type Syncer struct {
	store    Exchanger
	peer     Peer
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger
	metrics  *Metrics

	// stepMu serialises the exchanges; mu guards link (read by the admin API, which must not
	// wait for a slow store) and is never held across a call to the store.
	stepMu  sync.Mutex
	pending Report // the deltas of failed syncs, sent again with the next one (under stepMu)
	mu      sync.Mutex
	link    *Link
}

// SyncerOptions configure a Syncer.
type SyncerOptions struct {
	Name     string // the fleet's name, for the link's state
	Interval time.Duration
	Now      func() time.Time
	Log      *slog.Logger
	Metrics  *Metrics // nil: none
	// LocalAfter overrides DefaultLocalAfter (tests).
	LocalAfter time.Duration
}

// NewSyncer makes a syncer between store and peer.
func NewSyncer(store Exchanger, peer Peer, o SyncerOptions) *Syncer {
	if o.Interval <= 0 {
		o.Interval = DefaultSyncInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	l := NewLink(o.Name, o.Now())
	if o.LocalAfter > 0 {
		l.LocalAfter = o.LocalAfter
	}
	return &Syncer{store: store, peer: peer, interval: o.Interval, now: o.Now, log: o.Log, metrics: o.Metrics, link: l}
}

// Join syncs until the first exchange works or within has passed (JoinTimeout when 0), so that a
// replica starting during an outage adopts the fleet's verdicts before it serves. An error says
// the replica starts on local evidence; it keeps trying in Run.
func (s *Syncer) Join(ctx context.Context, within time.Duration) error {
	if within <= 0 {
		within = JoinTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for { // bounded by ctx: at most within / 100ms tries
		if s.Step(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("could not reach the fleet store within " + within.String() + ": " + s.Link().Reason)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Run syncs once per interval until ctx ends.
func (s *Syncer) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Step(ctx)
		}
	}
}

// Step runs one exchange and reports whether it worked.
func (s *Syncer) Step(ctx context.Context) bool {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	now := s.now()
	r := mergeReports(s.pending, s.peer.Report(now))
	s.pending = Report{}
	start := time.Now()
	v, err := s.store.Sync(ctx, now, r)
	if s.metrics != nil {
		s.metrics.SyncDuration.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		if s.metrics != nil {
			s.metrics.SyncErrors.Inc()
		}
		s.mu.Lock()
		wentLocal, connected := s.link.Failure(now, err), s.link.Connected()
		s.setGauges()
		s.mu.Unlock()
		if wentLocal {
			s.log.Warn("Lost the fleet store: judging on local evidence alone until it answers again", "fleet", s.link.Name, "error", err.Error())
			s.peer.Alone(now)
		}
		if connected {
			// Still within LocalAfter: the clients' use goes with the next sync. In local mode it
			// is dropped: the replica rejoins on fresh figures.
			s.pending = Report{Clients: r.Clients}
		}
		return false
	}
	// Adopt before the link says connected: whoever sees connected finds the view adopted.
	s.peer.Adopt(now, v)
	s.mu.Lock()
	joined := s.link.Success(now, v.Replicas)
	s.setGauges()
	s.mu.Unlock()
	if joined {
		s.log.Info("Joined the fleet store: sharing evidence and verdicts", "fleet", s.link.Name, "replicas", v.Replicas)
	}
	return true
}

// Connected reports whether the replica uses the fleet's view.
func (s *Syncer) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.link.Connected()
}

// setGauges (under mu) sets the link's gauges.
func (s *Syncer) setGauges() {
	if s.metrics == nil {
		return
	}
	if s.link.Connected() {
		s.metrics.Connected.Set(1)
	} else {
		s.metrics.Connected.Set(0)
	}
	s.metrics.Replicas.Set(float64(s.link.replicas))
}

// Link is the link's state for /admin/v1/channels.
func (s *Syncer) Link() adminapi.FleetLink {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.link.State()
}

// mergeReports adds the clients' use of a failed report (old) to the next one. The rest is not
// carried: the engine states its reports afresh in every one, and the proxy carries the verdicts
// it proposed itself.
func mergeReports(old, next Report) Report {
	if len(old.Clients) == 0 {
		return next
	}
	next.Clients = append([]ClientUse(nil), next.Clients...)
	byClient := make(map[string]int, len(next.Clients))
	for i, c := range next.Clients {
		byClient[c.Client] = i
	}
	for _, c := range old.Clients {
		if i, ok := byClient[c.Client]; ok {
			next.Clients[i].Requests += c.Requests
			next.Clients[i].Tokens += c.Tokens
		} else {
			next.Clients = append(next.Clients, c)
			byClient[c.Client] = len(next.Clients) - 1
		}
	}
	return next
}
