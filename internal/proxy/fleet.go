package proxy

import (
	"context"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/fleet"
	"github.com/switchyard-io/switchyard/internal/proxy/clients"
)

// FleetOptions connect the proxy to a fleet store (--fleet-redis): its replicas then share health
// evidence, verdicts and client usage, once per Interval, off the request path (internal/fleet).
type FleetOptions struct {
	// Store is the exchange with the store (fleet.NewStore).
	Store fleet.Exchanger
	// Name is the fleet's name (--fleet-name), shown on /admin/v1/channels.
	Name string
	// Interval is --fleet-sync-interval (default 1s).
	Interval time.Duration
	// LocalAfter overrides how long the store may fail before the replica runs on local evidence
	// (fleet.DefaultLocalAfter; tests).
	LocalAfter time.Duration
}

// fleetPeer is the proxy's side of the fleet exchange: it gathers the engine's outbox and the
// clients' use into a report and hands the fleet's view back to them.
type fleetPeer struct {
	s *Server

	mu sync.Mutex
	// own are the clients' own totals when their use was taken for the report in flight: the
	// store's totals minus these are the other replicas' use.
	own map[string]clients.FleetUse

	health fleetHealth // fleet_health.go
}

func newFleetPeer(s *Server) *fleetPeer { return &fleetPeer{s: s, own: map[string]clients.FleetUse{}} }

// Report implements fleet.Peer.
func (p *fleetPeer) Report(now time.Time) fleet.Report {
	var r fleet.Report
	p.reportHealth(now, &r)
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.own)
	if c := p.s.cfg.Load(); c != nil && c.auth != nil {
		for _, e := range c.auth.Entries {
			lim := e.Client.Limits
			if lim.RequestsPerMinute <= 0 && lim.TokensPerMinute <= 0 && lim.TokensPerDay <= 0 {
				continue
			}
			req, tok, own := e.Limiter.TakeUnsent(now)
			p.own[e.ID] = own
			if req != 0 || tok != 0 {
				r.Clients = append(r.Clients, fleet.ClientUse{Client: e.ID, Requests: req, Tokens: tok})
			}
			r.ReadClients = append(r.ReadClients, e.ID)
		}
	}
	return r
}

// Adopt implements fleet.Peer.
func (p *fleetPeer) Adopt(now time.Time, v fleet.View) {
	p.adoptHealth(now, v)
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.s.cfg.Load()
	if c == nil || c.auth == nil {
		return
	}
	for _, e := range c.auth.Entries {
		own, ok := p.own[e.ID]
		if !ok {
			continue
		}
		t := v.Clients[e.ID]
		e.Limiter.SetOthers(clients.FleetUse{On: true, Day: own.Day,
			MinuteReq: max(t.MinuteRequests-own.MinuteReq, 0), MinuteTok: max(t.MinuteTokens-own.MinuteTok, 0),
			DayTok: max(t.DayTokens-own.DayTok, 0)})
	}
}

// Alone implements fleet.Peer: the engine judges on local evidence and the client limits are
// this replica's share again.
func (p *fleetPeer) Alone(now time.Time) {
	p.aloneHealth(now)
	p.s.clients.limiters.Range(func(_, v any) bool {
		v.(*clients.Limiter).SetOthers(clients.FleetUse{})
		return true
	})
}

// JoinFleet reads the fleet's state (bounded by fleet.JoinTimeout) so that a replica starting
// during an outage adopts the fleet's verdicts before it serves. Without a fleet store it does
// nothing. An error means the replica starts on local evidence; the sync loop keeps trying.
func (s *Server) JoinFleet(ctx context.Context) error {
	if s.fleet == nil {
		return nil
	}
	return s.fleet.Join(ctx, fleet.JoinTimeout)
}

// runFleet runs the fleet exchange until ctx ends (Serve starts it).
func (s *Server) runFleet(ctx context.Context) {
	if s.fleet != nil {
		s.fleet.Run(ctx)
	}
}

// FleetStep runs one fleet exchange now (tests).
func (s *Server) FleetStep(ctx context.Context) bool {
	return s.fleet != nil && s.fleet.Step(ctx)
}

// fleetLink is the link's state for /admin/v1/channels; nil without a fleet store.
func (s *Server) fleetLink() *adminapi.FleetLink {
	if s.fleet == nil {
		return nil
	}
	l := s.fleet.Link()
	return &l
}

// newFleet makes the syncer of opts.Fleet; nil without one.
func (s *Server) newFleet() *fleet.Syncer {
	o := s.opts.Fleet
	if o == nil || o.Store == nil {
		return nil
	}
	s.fleetPeer = newFleetPeer(s)
	return fleet.NewSyncer(o.Store, s.fleetPeer, fleet.SyncerOptions{Name: o.Name, Interval: o.Interval,
		Now: s.clock.Now, Log: s.log, Metrics: fleet.NewMetrics(s.registry), LocalAfter: o.LocalAfter})
}

// FleetStoreSettings are the store's settings for a proxy fleet: a replica (and its phases)
// live for three intervals, at least 3 s, and the engine's phase names.
func FleetStoreSettings(name, replica string, interval time.Duration) fleet.Settings {
	if interval <= 0 {
		interval = fleet.DefaultSyncInterval
	}
	phases := make([]string, len(allPhases)) // metrics.go: every phase the engine has
	for i, p := range allPhases {
		phases[i] = p.String()
	}
	return fleet.Settings{Name: name, Replica: replica, Live: max(3*interval, 3*time.Second), Phases: phases, Interval: interval}
}
