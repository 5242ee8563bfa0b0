// Package health is Switchyard's health engine: the state machine that decides, for every
// channel×model, whether it gets traffic and how much.
//
// It is pure and deterministic. It must never start goroutines, do I/O, speak HTTP or read the
// clock: time enters only through Observation.At and the now arguments, so the same calls always
// produce the same transitions and the same journal. The proxy feeds it live attempts and the
// replay tool feeds it an access log; both depend on that. An Engine is safe for concurrent use:
// one mutex, held for one key's bookkeeping at a time (one model's candidates in Select).
//
// # Phases
//
//	Healthy <-> Degraded --trip--> Ejected --cooldown--> Probing --probes--> RampingUp --steps--> Healthy
//	                                  ^                     |                    |
//	                                  +-- probe failed -----+---- rise ----------+
//
// RateLimited overlays Healthy and Degraded while a 429 is honoured. Disabled (operator) wins over
// everything; when it is lifted or expires the key goes to Probing, never straight to traffic.
// Health is kept per channel×model: one model failing on a channel leaves its other models alone.
//
// # Outcomes
//
// Failures are server errors, timeouts, connection errors and cut streams. A 429 is counted as a
// window request but never as a failure; it neither extends nor breaks a failure streak and never
// ejects. Other 4xx (client errors) change nothing at all, not even the request count.
//
// # Window and resolution
//
// Each key keeps rings of count buckets and latency slices sized to its window (about 6 KiB in
// all for chat, 9 KiB for batch).
// Count buckets are 1 s wide for windows up to 5 min (ceil(Window/300) whole seconds beyond). The
// window at time t is the bucket of t plus the Window/1s buckets before it, [floor(t)-Window, t]:
// a superset of (t-Window, t], never shorter than Window and at most one bucket longer, so an
// observation leaves it between Window and Window+1s after it happened. The recent-error window
// is built the same way.
//
// Latency is recorded for successful attempts only: timeouts have their own rule, and a fast 5xx
// must not make a channel look fast. It goes into 60 log-spaced bins, three per doubling, kept per
// slice of Window/32 rounded up to whole buckets (2 s for chat, 10 s for batch): per-second
// histograms would not fit the memory budget. Bucket and slice tallies are 16-bit: once one
// outcome of a bucket, or one bin of a slice, reaches 65535, that bucket (slice) records nothing
// more until it rolls over, so what it holds is a sample with the traffic's proportions (a 1 h
// window has 12 s buckets and 2 min slices: that happens from about 5,000 requests/s on one
// channel×model). p95 is interpolated inside its bin; the bin edge at LatencyP95 is exact, so
// "p95 > LatencyP95" is decided exactly.
//
// # Trip rules
//
// Any one ejects a key in service (Healthy, Degraded, RateLimited):
//   - ErrorRateExceeded: failures/requests >= ErrorRatePercent with >= MinRequests in the window;
//   - TimeoutRateExceeded: timeouts/requests >= TimeoutRatePercent with >= MinRequests;
//   - LatencyP95Exceeded: window p95 > LatencyP95 with >= MinRequests;
//   - ConsecutiveFailures: that many failures in a row, at any volume;
//   - HealthScoreLow: score < EjectBelow continuously for EjectAfter.
//
// A zero threshold turns its rule off: chat's profile has no timeout-rate rule (a timeout is a
// failure, so its error rate and ConsecutiveFailures catch a channel that hangs, and four
// timeouts among forty requests stay noise); batch's limit is 8%. The count rules are checked on
// every observation and at every bucket boundary (old successes leaving the window raise a rate
// too); the p95 rule, the score, Degraded and HealthScoreLow are evaluated at every bucket
// boundary.
//
// # Health score
//
//	score = round(100 - E*Perr - (100-E)*Plat), clamped to [0, 100], E = ErrorWeightPercent
//	Perr  = max(P(window), P(recent window))
//	P     = min(1, failureRate / (ErrorRatePercent/100)) * min(1, requests/minReq)
//	Plat  = min(1, max(0, (p95/ref - 1) / 2)) * min(1, successes/MinRequests),  ref = max(baseline, 250ms)
//
// minReq is MinRequests for the window and ceil(MinRequests*RecentErrorWindow/Window) for the
// recent window; with ErrorRatePercent 0 the reference rate is 100%. The error penalty is full at
// the ejection threshold and damped at low volume (three requests at night cannot sink a score);
// the recent window reacts before a long window fills. The latency penalty is 0 at the baseline
// and full at three times it; the baseline counts as at least 250 ms, so a channel that answers in
// 7 ms is not penalised for a 20 ms scheduler hiccup. The baseline is the channel's own healthy p95: an EWMA of the window
// p95, updated when a latency slice closes while the key is Healthy with >= MinRequests
// successes, with weight slice/(10*Window) (a time constant of ten windows; the first value is
// taken as is). With the defaults, an error rate at the threshold alone gives 30 = EjectBelow, and
// latency alone can cost at most 30 points. Below DegradedBelow the key is Degraded and its
// routing weight is scaled by score/100.
//
// Status reports the score as 0 while a key is Ejected or Probing: it takes no traffic then, and
// the score its draining window would compute is no statement about the channel.
//
// # Recovery
//
// Cooldown: an ejection sets Cooldown doubled once per earlier ejection that has not decayed,
// capped by MaxCooldown. The doubling decays by one level per full MaxCooldown spent in service
// since the key last entered it (the end of a ramp, or its creation), applied at the next
// ejection: with chat settings, 30 min of healthy service forgets one repeat.
//
// Probes: when the cooldown is over the key is Probing and ProbesDue returns it. The first probe
// is due at once; the next is due ProbeInterval after the previous one was handed out, and not
// while one is in flight (until its Probe observation arrives, or for at most ProbeMaxLatency).
// ProbeSuccessesRequired successes in a row, each within ProbeMaxLatency, start the ramp; a failure
// or a slower success restarts the cooldown at its current length (the key never re-entered
// service, so it is the same ejection). A 429 answer to a probe is neutral.
//
// Ramp: RampingUp holds each of RampSteps for RampHold (traffic share 5/15/50/100 by default), then
// the key is Healthy. A rise during a step is a new ejection, with the doubled cooldown. A rise is
// (counted over the current step's non-probe attempts):
//   - RampErrorRise: the step's failure rate, counting the failure just seen, exceeds half of
//     ErrorRatePercent (failures*200 > requests*ErrorRatePercent; any failure when it is 0). With
//     chat's 25% a single failure among the first 7 requests of a step is a rise; later in the
//     step, more than 12.5% of its requests must have failed;
//   - RampLatencyRise: with at least 20 successes in the step, the step's p95 exceeds twice the
//     reference latency max(baseline, 250ms), or LatencyP95.
//
// # Rate limits
//
// A 429 blocks the key until At+RetryAfter (not routable, TrafficPercent 0). The first 429 of a
// burst (429s less than one bucket apart) multiplies the traffic share by
// (100-ShareReductionPercent)/100, down to 1% at least. The share then climbs back linearly at 100
// points per Window from the later of the last 429 and the end of Retry-After; RateLimited ends
// when it is back at 100.
//
// # Time
//
// Scheduled transitions (cooldown over, ramp step held, override expired, rate limit healed) and
// window verdicts are stamped with the moment they became due, and Observe, Select, Status,
// ProbesDue and Tick all advance a key through every bucket boundary and timer in order. So the
// journal does not depend on how often Tick or Status run. Observations older than a key's clock
// (races between proxy goroutines) count as happening at that clock.
//
// # Journal
//
// Every phase change, and every ramp step, is an Event with a CamelCase reason: the trip rules
// above, HealthScoreDegraded, HealthScoreRecovered, RateLimited, RateLimitRecovered,
// CooldownElapsed, ProbeFailed, ProbesPassed, RampStep, RampErrorRise, RampLatencyRise,
// RampCompleted, Disabled, Enabled. Actors are "rule", "probe", "operator" and "fleet"
// (a verdict another replica set, adopted through SetFleet).
//
// # Dry run
//
// A key whose policy is rolled out with mode DryRun (Target.DryRun) keeps a shadow: a second
// machine with the same settings that takes every outcome of the key instead of it. The shadow
// runs every rule above and journals each transition with the reason prefixed DryRun
// (DryRunErrorRateExceeded) and a message saying what it would do ("would eject openai-direct ×
// gpt-4o: error rate 27.0% (31/115) >= 25% over 1m0s"); Status carries its phase as DryRunPhase.
// The key itself takes no verdict, so Select and ProbesDue treat it as healthy (the proxy routes
// a dry run in listed order anyway). A shadow sends no probes: the key keeps its live traffic,
// and in Probing those attempts count as its probes. Operator overrides act on the key, not on
// the shadow.
//
// # Fleet
//
// Replicas of one gateway may share evidence through a fleet store (fleet.go): FleetOutbox
// reports the keys that are not quiet, SetFleet takes the other replicas' summed counts, the
// verdict the store holds, the probe lease and the fleet's Retry-After, as inputs like time. The
// rate, timeout-rate and p95 rules then count the fleet's requests (MinRequests is reachable at
// low traffic per replica), only on a complete view, and only when the rest of the fleet shows
// the problem without its worst replica: one replica's own broken egress stays its local verdict.
// The first replica to trip publishes the verdict; the others adopt it (actor "fleet"); one
// replica probes for the fleet; an expired input means local judgement again, as without a
// fleet. FleetBoard is the store's semantics in memory.
package health
