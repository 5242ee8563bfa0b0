package simulate

import (
	"fmt"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

// fleetSim is what a run with several replicas adds to sim: the replicas' fleet exchange
// (shared mode) and the fleet's figures.
//
// In shared mode every FleetSyncInterval the replicas that have something to say exchange
// through one health.FleetBoard (a Round: as if each exchanged just after the others). While the
// board holds nothing and no replica has anything to report, the exchange is skipped: it would
// change nothing, and a month at one exchange per replica per second is most of the run time.
type fleetSim struct {
	s       *sim
	shared  bool
	board   *health.FleetBoard
	names   []string
	hot     []bool                  // per replica: it may have something to report
	out     []int                   // per replica: keys out of service (Ejected, Probing) as its journal says
	phases  [][]health.Phase        // per replica, per channel: the phase its journal last said
	pending [][]health.FleetVerdict // per replica: proposals for the next exchange
	active  bool                    // the last exchange gave a replica some input: the board holds something
	entries []health.RoundEntry
	rep     []int // entries' replicas

	first      int     // the channel of the latest first attempt
	tracked    []int   // per channel: the outage being measured (it began while the channel took the first attempts), -1 none
	lastFirst  []int64 // per channel: the latest first attempt in the tracked outage, -1 none
	seenOutage []int   // per channel: the latest outage noticed
	moved      []time.Duration
}

// notMovedTail: an outage in whose last 5 s requests still went first to the channel never saw
// its traffic move.
const notMovedTail = int64(5 * time.Second)

func newFleetSim(s *sim, mode string) *fleetSim {
	n, channels := len(s.engs), len(s.keys)
	f := &fleetSim{s: s, shared: mode == FleetShared, names: make([]string, n), hot: make([]bool, n), out: make([]int, n),
		phases: make([][]health.Phase, n), pending: make([][]health.FleetVerdict, n),
		tracked: make([]int, channels), lastFirst: make([]int64, channels), seenOutage: make([]int, channels)}
	if f.shared {
		f.board = health.NewFleetBoard(s.cfg.FleetSyncInterval)
	}
	for i := range n {
		f.names[i] = fmt.Sprintf("replica-%d", i)
		f.phases[i] = make([]health.Phase, channels) // Healthy
	}
	for c := range channels {
		f.tracked[c], f.lastFirst[c], f.seenOutage[c] = -1, -1, -1
	}
	return f
}

// phase follows one journal event of replica rep.
func (f *fleetSim) phase(rep int, ev health.Event) {
	c := f.s.index(ev.Channel)
	out := func(p health.Phase) bool { return p == health.PhaseEjected || p == health.PhaseProbing }
	if out(f.phases[rep][c]) {
		f.out[rep]--
	}
	f.phases[rep][c] = ev.To
	if out(ev.To) {
		f.out[rep]++
	}
	f.hot[rep] = true // a key that changed phase is not quiet
}

// sync is one exchange of the shared fleet at t.
func (f *fleetSim) sync(t int64) {
	if !f.active && !anyTrue(f.hot) {
		return
	}
	now := at(t)
	f.entries, f.rep = f.entries[:0], f.rep[:0]
	for rep, e := range f.s.engs {
		if !f.active && !f.hot[rep] {
			continue
		}
		f.entries = append(f.entries, health.RoundEntry{Replica: f.names[rep], Reports: e.FleetOutbox(now), Proposals: f.pending[rep]})
		f.rep = append(f.rep, rep)
	}
	f.board.Round(now, f.entries)
	f.active = false
	for i := range f.entries {
		en, rep := &f.entries[i], f.rep[i]
		f.pending[rep] = f.pending[rep][:0]
		for _, in := range en.Inputs {
			if v := f.s.engs[rep].SetFleet(now, in); v != nil {
				f.pending[rep] = append(f.pending[rep], *v)
			}
		}
		f.active = f.active || len(en.Inputs) > 0
		f.hot[rep] = len(en.Reports) > 0 || len(f.pending[rep]) > 0
		f.s.journal(rep)
	}
}

func anyTrue(v []bool) bool {
	for _, b := range v {
		if b {
			return true
		}
	}
	return false
}

// firstChoice notes a request's first attempt on channel c at t. A panic-routed one (every
// channel out of service on its replica) is no traffic that could have moved.
func (f *fleetSim) firstChoice(c int, t int64, panicRouted bool) {
	f.first = c
	if f.tracked[c] >= 0 && !panicRouted {
		if d, _, i := f.s.down(c, t); d && i == f.tracked[c] {
			f.lastFirst[c] = t
		}
	}
}

// drain notices outages starting (on the channel taking the first attempts) and ending.
func (f *fleetSim) drain(now int64) {
	for c := range f.s.keys {
		d, _, i := f.s.down(c, now)
		if d && i > f.seenOutage[c] {
			f.seenOutage[c] = i
			if c == f.first && len(f.s.keys) > 1 && f.tracked[c] < 0 {
				f.tracked[c], f.lastFirst[c] = i, -1
			}
		}
		if w := f.tracked[c]; w >= 0 && (!d || i != w) {
			f.settle(c)
		}
	}
}

// settle records the tracked outage of channel c, which has ended.
func (f *fleetSim) settle(c int) {
	o := f.s.outages[c][f.tracked[c]]
	switch last := f.lastFirst[c]; {
	case last >= 0 && last >= o.to-notMovedTail:
		f.s.res.Fleet.NotMoved++
	case last < 0:
		f.moved = append(f.moved, 0)
	default:
		f.moved = append(f.moved, time.Duration(last-o.from))
	}
	f.tracked[c] = -1
}

func (f *fleetSim) finish() {
	for c := range f.s.keys {
		if f.tracked[c] >= 0 {
			f.settle(c)
		}
	}
	fig := f.s.res.Fleet
	fig.MoveP50, fig.MoveP90 = quantile(f.moved, 50), quantile(f.moved, 90)
	f.s.res.EndedBeforeMove = fig.NotMoved
}
