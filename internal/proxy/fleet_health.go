package proxy

import (
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/fleet"
	"github.com/switchyard-io/switchyard/internal/health"
)

// The health half of the fleet exchange: the engine's outbox (FleetOutbox) and the verdicts it
// proposed go to the store's board; the board's inputs go back to the engine (SetFleet), which
// decides. Nothing here judges.

// fleetHealth is what the exchange keeps between syncs (under its own mutex: the admin API reads
// keys while a sync runs).
type fleetHealth struct {
	mu sync.Mutex
	// next are the verdicts SetFleet returned, for the next sync; inflight those sent in the sync
	// under way, sent again if it fails.
	next, inflight []health.FleetVerdict
	// keys is the fleet's view of each key as of the last sync, for /admin/v1/channels.
	keys map[health.Key]adminapi.FleetKeyState
}

func (p *fleetPeer) reportHealth(now time.Time, r *fleet.Report) {
	reports := p.s.engine.FleetOutbox(now)
	h := &p.health
	h.mu.Lock()
	h.inflight = append(h.inflight, h.next...)
	h.next = nil
	props := append([]health.FleetVerdict(nil), h.inflight...)
	h.mu.Unlock()
	r.Health = &fleet.HealthReport{Reports: reports, Proposals: props}
	for i := range reports {
		// The phase of every key this replica reports, for the fleet's replicas per phase.
		r.Phases = append(r.Phases, fleet.Phase{Key: fleet.KeyString(reports[i].Key), Phase: reports[i].Phase.String()})
	}
}

func (p *fleetPeer) adoptHealth(now time.Time, v fleet.View) {
	var next []health.FleetVerdict
	keys := make(map[health.Key]adminapi.FleetKeyState, len(v.Inputs))
	for _, in := range v.Inputs {
		if prop := p.s.engine.SetFleet(now, in); prop != nil {
			next = append(next, *prop)
		}
		ks := adminapi.FleetKeyState{}
		if in.Verdict != nil {
			ks.Phase, ks.VerdictBy = in.Verdict.Phase.String(), in.Verdict.By
		}
		keys[in.Key] = ks
	}
	for k, phases := range v.Phases {
		hk := fleet.ParseKey(k)
		ks := keys[hk]
		ks.Replicas = phases
		if ks.Phase == "" {
			ks.Phase = majorityPhase(phases)
		}
		keys[hk] = ks
	}
	h := &p.health
	h.mu.Lock()
	h.inflight = nil
	h.next = append(h.next, next...)
	h.keys = keys
	h.mu.Unlock()
}

func (p *fleetPeer) aloneHealth(time.Time) {
	// The engine's inputs expire by themselves (FleetInput.Expires, a few intervals): nothing to
	// tell it. What the admin API showed of the fleet is no longer known.
	h := &p.health
	h.mu.Lock()
	h.keys, h.inflight, h.next = nil, nil, nil
	h.mu.Unlock()
}

// fleetKeyState is the fleet's view of k for /admin/v1/channels; nil without a fleet store, in
// local mode, or when the fleet holds nothing on the key (it is quiet everywhere).
func (s *Server) fleetKeyState(k health.Key) *adminapi.FleetKeyState {
	if s.fleetPeer == nil {
		return nil
	}
	h := &s.fleetPeer.health
	h.mu.Lock()
	defer h.mu.Unlock()
	ks, ok := h.keys[k]
	if !ok || (ks.Phase == "" && len(ks.Replicas) == 0) {
		return nil
	}
	return &ks
}

// majorityPhase is the phase most replicas report (ties: the more severe one).
func majorityPhase(phases map[string]int) string {
	best, bestN, bestSev := "", 0, -1
	for name, n := range phases {
		ph, err := health.ParsePhase(name)
		if err != nil {
			continue
		}
		if n > bestN || (n == bestN && ph.Severity() > bestSev) {
			best, bestN, bestSev = name, n, ph.Severity()
		}
	}
	return best
}
