package proxy

import (
	"time"

	"github.com/switchyard-io/switchyard/internal/fleet"
)

// The health half of the fleet exchange: the engine's outbox to the store, the store's view to
// the engine. It waits for the engine's fleet inputs (internal/health).

func (p *fleetPeer) reportHealth(now time.Time, r *fleet.Report) {}

func (p *fleetPeer) adoptHealth(now time.Time, v fleet.View) {}

func (p *fleetPeer) aloneHealth(now time.Time) {}
