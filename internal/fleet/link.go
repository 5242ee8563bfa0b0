package fleet

import (
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
)

// DefaultLocalAfter is how long a replica keeps trying the store before it runs on its local
// evidence alone: long enough that one lost packet or a server's fork for a snapshot changes
// nothing, short enough that a replica never judges for long on a fleet view that has stopped.
const DefaultLocalAfter = 3 * time.Second

// Link is a replica's link to the store: connected, or in local mode after the store failed for
// LocalAfter. It is a pure state machine on the times it is given.
type Link struct {
	Name       string
	LocalAfter time.Duration

	connected    bool
	since        time.Time
	reason       string
	failingSince time.Time // the first failure since the last success; zero while syncs succeed
	replicas     int
}

// NewLink is a link that has not joined yet (local mode, reason "joining").
func NewLink(name string, now time.Time) *Link {
	return &Link{Name: name, LocalAfter: DefaultLocalAfter, since: now, reason: "joining the fleet"}
}

// Success records a sync that worked; it reports whether the replica has just (re)joined.
func (l *Link) Success(now time.Time, replicas int) (joined bool) {
	l.failingSince = time.Time{}
	l.replicas = replicas
	if l.connected {
		return false
	}
	l.connected, l.since, l.reason = true, now, ""
	return true
}

// Failure records a sync that failed; it reports whether the replica has just turned to local
// mode (the store has failed for LocalAfter). Before that the replica stays connected on the last
// view it had.
func (l *Link) Failure(now time.Time, err error) (wentLocal bool) {
	if l.failingSince.IsZero() {
		l.failingSince = now
	}
	if !l.connected {
		l.reason = err.Error()
		return false
	}
	if now.Sub(l.failingSince) < l.LocalAfter {
		return false
	}
	l.connected, l.since, l.reason, l.replicas = false, now, err.Error(), 0
	return true
}

// Connected reports whether the replica uses the fleet's view.
func (l *Link) Connected() bool { return l.connected }

// State is the link for /admin/v1/channels.
func (l *Link) State() adminapi.FleetLink {
	since := l.since.UTC()
	return adminapi.FleetLink{Name: l.Name, Connected: l.connected, Since: &since, Reason: l.reason, Replicas: l.replicas}
}
